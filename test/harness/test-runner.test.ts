import t from 'tap';

/*
 * tap gives each test file the loaders of the plugins it was built with. Out of the box that
 * includes @tapjs/typescript, which loads ts-node and the TypeScript compiler: about 2 s of CPU in
 * every test file, for nothing, since tsx (package.json "tap" node-arg) already runs the sources.
 * package.json disables that plugin, but tap applies the change to its built test class only when
 * a run starts, after it has chosen the loaders for that run: the first `npm test` after `npm ci`,
 * which is every CI run, paid the cost in all ~170 files. `npm test` runs `tap build` first.
 */
t.test('a test file runs with tsx as its only TypeScript loader', async (t) => {
  const argv = process.execArgv.join(' ');
  t.match(argv, /--import=tsx\b/, 'tsx runs the sources');
  t.notMatch(argv, /@tapjs\/typescript/, 'no ts-node loader from the disabled typescript plugin');
});
