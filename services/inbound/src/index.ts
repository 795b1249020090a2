export { startInbound, type InboundRole } from './inbound.ts';
