export { startFeed, type FeedRole } from './feed.ts';
export { stampBatch } from '@ens/core/internal';
