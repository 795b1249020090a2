/**
 * The import-cycle check (npm run lint). A cycle makes a module's load order depend on which file
 * is imported first, and ties two files so neither can change alone. Workspace packages are
 * followed into their sources: node_modules/@ens/* are links to the workspaces, and the
 * `ens-source` export condition points at src/, so a cycle that crosses workspaces is found too.
 * test/architecture/import-cycles.test.ts proves the check catches a cycle.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Modules import each other in a cycle; move what both need into a third module.',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['(^|/)dist/', '(^|/)node_modules/'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['ens-source', 'import', 'require', 'node', 'default'],
      mainFields: ['module', 'main', 'types'],
      extensions: ['.ts', '.mts', '.js', '.mjs', '.cjs', '.json', '.d.ts'],
    },
  },
};
