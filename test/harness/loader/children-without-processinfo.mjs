// tap starts every test file with its processinfo hook, and the hook adds itself to the
// NODE_OPTIONS of every process a test file starts, through process-on-spawn's wrapper of Node's
// spawn. In an ENS process started from source it costs about 0.6 s of CPU (a quarter of its
// start): it passes each module's text to the main thread and measures its lines, for coverage
// and for `tap --changed`, neither of which the suite uses (coverage is off). A listener added
// after the hook's takes it out again; tap's own record of the test file is unchanged.
import { createRequire } from 'node:module';

const PROCESSINFO = /\s*"?--(?:import|loader)=[^\s"]*@tapjs\/processinfo\/[^\s"]*"?/g;

/** NODE_OPTIONS without tap's processinfo hook. */
const withoutProcessinfo = (nodeOptions) => nodeOptions.replace(PROCESSINFO, '').trim();

if (process.env.NODE_OPTIONS?.includes('@tapjs/processinfo/')) {
  const onSpawn = createRequire(import.meta.url)('process-on-spawn');
  onSpawn.addListener((child) => {
    const nodeOptions = child.env.NODE_OPTIONS;
    if (nodeOptions) child.env = { ...child.env, NODE_OPTIONS: withoutProcessinfo(nodeOptions) };
  });
}
