#!/usr/bin/env node
// The conformance kit's command: `npx ens-plugin-check ./my-plugin`.
await import('../dist/check-cli.js');
