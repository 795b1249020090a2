import { main } from './conformance/check-cli.ts';

process.exitCode = await main(process.argv.slice(2));
