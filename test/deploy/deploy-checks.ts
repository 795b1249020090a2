import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '@ens/core';
import { allVariables } from '@ens/core/internal';
import { parseRoles, ROLES, type Role } from '@ens/app/roles';
import { parseAllDocuments } from 'yaml';
import {
  execForm,
  readDeploy,
  readDockerfile,
  type DeployedProcess,
  type DeployModel,
} from './deploy-model.ts';

/*
 * The rules deploy/ must follow, each a list of problems (empty when the files agree with ENS):
 * every command is one the `ens` launcher has, every role one ENS knows, every port the one the
 * process listens on, every probe path a route the process answers, every variable one ENS reads.
 */

/**
 * Variables ENS does not declare but a library it uses reads: the AWS SDK's default credential
 * chain takes these for the S3 media store (docs/guides/providers.md, "Inline images in S3").
 */
export const LIBRARY_VARIABLES = new Set(['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']);

/**
 * Which HTTP server answers a process's probes: the API (api role, on PORT) or the health server
 * (ENS_HEALTH_PORT).
 */
export type HealthServer = 'api' | 'health';

export interface LiveEns {
  /** Commands `ens --help` lists. */
  commands: ReadonlySet<string>;
  /** Whether that server of a running ENS has a GET route at `path` (anything but 404). */
  routeExists(server: HealthServer, path: string): Promise<boolean>;
}

/**
 * Values that make a Secret template's placeholders valid, to check the rest of the configuration.
 */
export function filledSecrets(): Record<string, string> {
  return {
    DATABASE_URL: 'postgres://ens:secret@postgres:5432/ens',
    NATS_URL: 'nats://nats:4222',
    ENS_MASTER_KEY: randomBytes(32).toString('base64'),
    AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE',
    AWS_SECRET_ACCESS_KEY: 'example',
  };
}

const PLACEHOLDER = /CHANGE-ME/;

/** The process's environment with every placeholder replaced by a valid value. */
export function withSecretsFilled(env: Record<string, string>): Record<string, string> {
  const fill = filledSecrets();
  return Object.fromEntries(
    Object.entries(env).map(([k, v]) => [
      k,
      PLACEHOLDER.test(v) && fill[k] !== undefined ? fill[k] : v,
    ]),
  );
}

export interface ServeCommand {
  command: string;
  roles: Role[] | null;
  error?: string;
}

/**
 * The `ens` command a process runs, when it runs the launcher: `node bin/ens.mjs serve --roles
 * api`.
 */
export function ensCommand(p: DeployedProcess): ServeCommand | null {
  if (p.argv[0] !== 'node') return null;
  const [command = '', ...rest] = p.argv.slice(2);
  if (command !== 'serve') return { command, roles: null };
  const at = rest.indexOf('--roles');
  const given =
    at >= 0 ? rest[at + 1] : rest.find((a) => a.startsWith('--roles='))?.slice('--roles='.length);
  try {
    return { command, roles: parseRoles(given) };
  } catch (e) {
    return { command, roles: null, error: (e as Error).message };
  }
}

export function portVariable(roles: readonly Role[]): 'PORT' | 'ENS_HEALTH_PORT' {
  return roles.includes('api') ? 'PORT' : 'ENS_HEALTH_PORT';
}

export function checkVariables(model: DeployModel): string[] {
  const known = new Set(allVariables().map((v) => v.name));
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const v of model.variables) {
    const key = `${v.name} ${v.where}`;
    if (seen.has(key) || known.has(v.name) || LIBRARY_VARIABLES.has(v.name)) continue;
    seen.add(key);
    problems.push(
      `${v.where}: ${v.name} is not a variable ENS reads (packages/core/src/config/variables.ts)`,
    );
  }
  return problems;
}

/** Command, role, port, probe and configuration of each process. */
export async function checkProcesses(
  model: DeployModel,
  repoRoot: string,
  live: LiveEns,
): Promise<string[]> {
  const problems: string[] = [];
  const rootPkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
    bin: Record<string, string>;
    scripts: Record<string, string>;
  };
  const known = new Set(allVariables().map((v) => v.name));
  for (const p of model.processes) {
    const say = (s: string) => problems.push(`${p.where}: ${s}`);
    if (p.argv[0] === 'npm') {
      if (p.argv[1] !== 'run' || !rootPkg.scripts[p.argv[2] ?? ''])
        say(`\`${p.argv.join(' ')}\` is not an npm script of the repository`);
      continue;
    }
    if (p.argv[0] !== 'node') {
      say(`runs \`${p.argv.join(' ')}\`, not the ens launcher`);
      continue;
    }
    const script = p.argv[1] ?? '';
    if (script !== rootPkg.bin.ens)
      say(`runs node ${script}, not the ens launcher ${rootPkg.bin.ens}`);
    else if (!existsSync(path.join(repoRoot, p.dir, script)))
      say(`${path.join(p.dir, script)} does not exist`);
    const cmd = ensCommand(p)!;
    if (!live.commands.has(cmd.command)) {
      say(`\`ens ${cmd.command}\` is not an ens command (ens --help)`);
      continue;
    }
    if (cmd.error) say(cmd.error);
    if (p.server !== (cmd.command === 'serve'))
      say(
        p.server
          ? `a server resource runs \`ens ${cmd.command}\`, which exits`
          : '`ens serve` runs as a one-off command',
      );
    try {
      loadConfig(withSecretsFilled(p.env));
    } catch (e) {
      say(`ENS refuses this configuration: ${(e as Error).message}`);
    }
    if (cmd.command !== 'serve' || !cmd.roles) continue;
    if (known.has('ENS_PROCESSES') && p.source === 'kubernetes' && p.env.ENS_PROCESSES !== '1') {
      say(
        "ENS_PROCESSES must be 1 in a pod: Kubernetes scales by replicas, and a pod's " +
          'resources are sized for one process',
      );
    }
    const portVar = portVariable(cmd.roles);
    const port = Number(p.env[portVar]);
    if (!p.env[portVar] || !Number.isInteger(port) || port <= 0) {
      say(
        `roles ${cmd.roles.join(',')} serve their probes on ${portVar}, which is not set to a port`,
      );
      continue;
    }
    if (p.containerPorts !== null && !p.containerPorts.includes(port))
      say(`${portVar}=${port} but the ports declared are ${p.containerPorts.join(', ') || 'none'}`);
    if (p.source !== 'dockerfile' && !p.probes.some((x) => x.path === '/readyz'))
      say('has no probe on /readyz');
    for (const probe of p.probes) {
      if (probe.port !== port)
        say(`${probe.kind} ${probe.path} goes to port ${probe.port}, but ${portVar}=${port}`);
      const server = portVar === 'PORT' ? 'api' : 'health';
      if (!(await live.routeExists(server, probe.path)))
        say(`${probe.kind} path ${probe.path} is not a route of the ${server} server`);
    }
  }
  return problems;
}

const podLabels = (doc: {
  spec?: { template?: { metadata?: { labels?: Record<string, string> } } };
}) => doc.spec?.template?.metadata?.labels ?? {};
const selects = (selector: Record<string, string> | undefined, labels: Record<string, string>) =>
  selector !== undefined &&
  Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([k, v]) => labels[k] === v);

/**
 * One Deployment per role, Services and PodDisruptionBudgets that select them, kustomization
 * complete.
 */
export function checkKubernetes(model: DeployModel, deployDir: string): string[] {
  const problems: string[] = [];
  const docs = model.kubernetes;
  const deployments = docs.filter((d) => d.doc.kind === 'Deployment');
  const roleOf = new Map<string, Role>();
  for (const d of deployments) {
    const where = `kubernetes/${d.file} Deployment ${d.doc.metadata?.name}`;
    const serves = model.processes
      .filter((p) => p.where.startsWith(`${where} `))
      .map(ensCommand)
      .filter((c) => c?.roles);
    const roles = serves.flatMap((c) => c!.roles!);
    if (roles.length === 1) roleOf.set(d.doc.metadata.name, roles[0]!);
    if (!selects(d.doc.spec?.selector?.matchLabels, podLabels(d.doc)))
      problems.push(`${where}: its selector does not match its pod labels`);
    const c = d.doc.spec?.template?.spec?.containers?.[0];
    for (const probe of ['livenessProbe', 'readinessProbe'])
      if (!c?.[probe]?.httpGet) problems.push(`${where}: no ${probe}`);
    const pod = d.doc.spec?.template?.spec ?? {};
    if (pod.securityContext?.runAsNonRoot !== true)
      problems.push(`${where}: the pod does not require runAsNonRoot`);
    if (c?.securityContext?.readOnlyRootFilesystem !== true)
      problems.push(`${where}: the root filesystem is writable`);
    if (!c?.resources?.requests) problems.push(`${where}: no resource requests`);
  }
  for (const role of ROLES) {
    const n = [...roleOf.values()].filter((r) => r === role).length;
    if (n !== 1)
      problems.push(`kubernetes: ${n} Deployments run the ${role} role alone; expected one`);
  }
  for (const { file, doc } of docs.filter(
    (d) => d.doc.kind === 'Service' || d.doc.kind === 'PodDisruptionBudget',
  )) {
    const where = `kubernetes/${file} ${doc.kind} ${doc.metadata?.name}`;
    const selector = doc.kind === 'Service' ? doc.spec?.selector : doc.spec?.selector?.matchLabels;
    const targets = deployments.filter((d) => selects(selector, podLabels(d.doc)));
    if (targets.length === 0) {
      problems.push(`${where}: selects no Deployment's pods`);
      continue;
    }
    if (doc.kind !== 'Service') continue;
    for (const port of doc.spec?.ports ?? []) {
      for (const t of targets) {
        const ports = (t.doc.spec.template.spec.containers ?? []).flatMap(
          (c: { ports?: { name?: string; containerPort: number }[] }) => c.ports ?? [],
        );
        if (
          !ports.some(
            (p: { name?: string; containerPort: number }) =>
              p.name === port.targetPort || p.containerPort === port.targetPort,
          )
        ) {
          problems.push(
            `${where}: targetPort ${port.targetPort} is not a port of Deployment ${t.doc.metadata.name}`,
          );
        }
      }
      // A Service takes traffic from outside: HTTP for the api role, SMTP for the inbound role.
      const roles = new Set(targets.map((t) => roleOf.get(t.doc.metadata.name)));
      if (roles.size !== 1 || !(roles.has('api') || roles.has('inbound')))
        problems.push(
          `${where}: selects pods that do not run the api role alone (or the inbound role alone)`,
        );
    }
  }
  if (
    !docs.some(
      (d) =>
        d.doc.kind === 'Service' &&
        deployments.some(
          (x) =>
            roleOf.get(x.doc.metadata.name) === 'api' &&
            selects(d.doc.spec?.selector, podLabels(x.doc)),
        ),
    )
  ) {
    problems.push('kubernetes: no Service for the api');
  }
  for (const d of deployments) {
    if (
      !docs.some(
        (p) =>
          p.doc.kind === 'PodDisruptionBudget' &&
          selects(p.doc.spec?.selector?.matchLabels, podLabels(d.doc)),
      )
    ) {
      problems.push(`kubernetes: no PodDisruptionBudget covers Deployment ${d.doc.metadata?.name}`);
    }
  }
  const migrations = model.processes.filter(
    (p) => p.source === 'kubernetes' && ensCommand(p)?.command === 'migrate',
  );
  if (migrations.length === 0) problems.push('kubernetes: nothing runs `ens migrate`');

  const kustomization = docs.find((d) => d.doc.kind === 'Kustomization');
  if (kustomization) {
    const listed = new Set<string>(kustomization.doc.resources ?? []);
    const files = new Set(docs.filter((d) => d.doc.kind !== 'Kustomization').map((d) => d.file));
    for (const f of listed)
      if (!existsSync(path.join(deployDir, 'kubernetes', f)))
        problems.push(`kubernetes/${kustomization.file}: lists ${f}, which does not exist`);
    for (const f of files) {
      // The Secret template is applied by hand, filled in; applying it from here would overwrite
      // real secrets.
      const template = docs.filter((d) => d.file === f).every((d) => d.doc.kind === 'Secret');
      if (template && listed.has(f))
        problems.push(
          `kubernetes/${kustomization.file}: applies the Secret template ${f}, which would overwrite the real Secret`,
        );
      if (!template && !listed.has(f))
        problems.push(`kubernetes/${kustomization.file}: does not list ${f}`);
    }
    const images = new Set<string>(
      docs.flatMap((d) =>
        (d.doc.spec?.template?.spec?.containers ?? []).map((c: { image: string }) => c.image),
      ),
    );
    for (const i of kustomization.doc.images ?? [])
      if (!images.has(i.name))
        problems.push(`kubernetes/${kustomization.file}: image ${i.name} is used by no container`);
  }
  return problems;
}

/** Multi-stage, the runtime stage holding the build's output only, as a non-root user. */
export function checkDockerfile(model: DeployModel, repoRoot: string): string[] {
  const problems: string[] = [];
  const stages = model.stages;
  if (stages.length < 2)
    problems.push('Dockerfile: one stage; the build tools must stay out of the runtime image');
  const runtime = stages.at(-1) ?? [];
  const user = runtime
    .filter((i) => i.op === 'USER')
    .at(-1)
    ?.args.split(':')[0];
  if (user === undefined || user === 'root' || user === '0')
    problems.push(`Dockerfile: the runtime stage runs as ${user ?? 'root (no USER)'}`);
  for (const i of runtime.filter((x) => x.op === 'COPY' || x.op === 'ADD')) {
    if (!/--from=/.test(i.args))
      problems.push(
        `Dockerfile:${i.line}: the runtime stage copies from the build context, not from the build stage`,
      );
  }
  const build = stages.slice(0, -1).flat();
  if (!build.some((i) => i.op === 'RUN' && /\bnpm ci\b/.test(i.args)))
    problems.push('Dockerfile: the build stage does not run npm ci');
  if (!build.some((i) => i.op === 'RUN' && /\bnpm run build\b/.test(i.args)))
    problems.push('Dockerfile: the build stage does not run npm run build');
  if (!build.some((i) => i.op === 'RUN' && /npm ci --omit=dev/.test(i.args)))
    problems.push('Dockerfile: no production-only dependency install');
  // What the build reads, and what the runtime tree is assembled from, must reach the build
  // context.
  const needed = [
    'package.json',
    'package-lock.json',
    'scripts/build.mjs',
    'bin/ens.mjs',
    'services/ops/assets/console.css',
    'packages/core/src/db/migrations',
  ];
  for (const f of needed) {
    if (!existsSync(path.join(repoRoot, f)))
      problems.push(`Dockerfile: needs ${f}, which the repository does not have`);
    const hit = model.dockerignore.find(
      (pattern) => path.matchesGlob(f, pattern) || path.matchesGlob(f.split('/')[0]!, pattern),
    );
    if (hit) problems.push(`.dockerignore: "${hit}" keeps ${f} out of the build context`);
  }
  const assembles = build
    .filter((i) => i.op === 'RUN')
    .map((i) => i.args)
    .join('\n');
  for (const part of ['bin', 'dist', 'assets'])
    if (!new RegExp(`\\b${part}\\b`).test(assembles))
      problems.push(`Dockerfile: the runtime tree does not take ${part}/`);
  // The runtime tree keeps each workspace's dist/, bin/ and assets/ only: whatever a workspace
  // exports or installs as a command must live there.
  const groups = ['packages', 'services', 'plugins', 'apps'];
  for (const group of groups) {
    for (const name of readdirSync(path.join(repoRoot, group))) {
      const file = path.join(group, name, 'package.json');
      if (!existsSync(path.join(repoRoot, file))) continue;
      const pkg = JSON.parse(readFileSync(path.join(repoRoot, file), 'utf8')) as {
        exports?: Record<string, { default?: string }>;
        bin?: Record<string, string>;
      };
      const shipped = [
        ...Object.values(pkg.exports ?? {}).map((e) => e.default),
        ...Object.values(pkg.bin ?? {}),
      ].filter((x): x is string => typeof x === 'string');
      for (const target of shipped) {
        if (!/^(\.\/)?(dist|bin)\//.test(target))
          problems.push(
            `Dockerfile: ${file} points at ${target}, outside the dist/ and bin/ the image keeps`,
          );
      }
    }
  }
  const entry = runtime.filter((i) => i.op === 'ENTRYPOINT').at(-1);
  if (entry && execForm(entry.args).join(' ') !== 'node bin/ens.mjs')
    problems.push(`Dockerfile: ENTRYPOINT ${entry.args} is not the ens launcher`);
  return problems;
}

/**
 * The Tiltfile: one resource per role, a cluster mode that builds this Dockerfile and forwards to
 * the api's port.
 */
export function checkTilt(model: DeployModel, deployDir: string): string[] {
  const problems: string[] = [];
  const tilt = model.processes.filter((p) => p.source === 'tilt');
  for (const role of ROLES) {
    const n = tilt.filter(
      (p) => p.server && ensCommand(p)?.roles?.length === 1 && ensCommand(p)?.roles?.[0] === role,
    ).length;
    if (n !== 1)
      problems.push(`Tiltfile: ${n} local resources serve the ${role} role alone; expected one`);
  }
  const ports = tilt
    .filter((p) => p.server)
    .map((p) => ({ p, port: p.env[portVariable(ensCommand(p)?.roles ?? [])] }));
  for (const { p, port } of ports)
    if (ports.some((o) => o.p !== p && o.port === port))
      problems.push(`${p.where}: port ${port} is used by another local resource`);
  const images = new Set(
    model.kubernetes.flatMap((d) =>
      (d.doc.spec?.template?.spec?.containers ?? []).map((c: { image: string }) => c.image),
    ),
  );
  for (const b of model.tilt.dockerBuilds) {
    if (!images.has(b.image))
      problems.push(`Tiltfile: docker_build('${b.image}') builds an image no manifest uses`);
    if (!existsSync(path.join(deployDir, b.dockerfile)))
      problems.push(`Tiltfile: docker_build's dockerfile ${b.dockerfile} does not exist`);
  }
  for (const dir of model.tilt.kustomizeDirs)
    if (!existsSync(path.join(deployDir, dir, 'kustomization.yaml')))
      problems.push(`Tiltfile: kustomize('${dir}') has no kustomization.yaml`);
  for (const f of model.tilt.portForwards) {
    const d = model.processes.find(
      (p) =>
        p.source === 'kubernetes' && p.server && p.where.includes(` Deployment ${f.resource} `),
    );
    if (!d) problems.push(`Tiltfile: k8s_resource('${f.resource}') is no Deployment`);
    else if (!d.containerPorts?.includes(f.container))
      problems.push(
        `Tiltfile: k8s_resource('${f.resource}') forwards to port ${f.container}, which it does not declare`,
      );
  }
  return problems;
}

/** A JSON patch op as kustomize applies it; only what the dev overlay uses (add, replace, remove). */
function applyJsonPatch(doc: any, op: { op: string; path: string; value?: unknown }): void {
  const keys = op.path
    .split('/')
    .slice(1)
    .map((k) => k.replaceAll('~1', '/').replaceAll('~0', '~'));
  let at = doc;
  for (const k of keys.slice(0, -1)) at = at?.[k];
  const last = keys.at(-1)!;
  if (at === undefined || at === null) return;
  if (op.op === 'remove') delete at[last];
  else at[last] = op.value;
}

/**
 * Tilt's --cluster mode as a live update: docker_build_with_restart builds a Dockerfile stage that
 * runs ENS from source, syncs the workspaces to where that stage copied them, and its entrypoint,
 * which replaces every `ens` container's command, keeps each workload's role (given in args).
 */
export function checkTiltLiveUpdate(deployDir: string, repoRoot: string): string[] {
  const problems: string[] = [];
  const model = readDeploy(deployDir);
  const build = model.tilt.dockerBuilds.find(
    (b) => b.call === 'docker_build_with_restart' && b.image === 'ens',
  );
  const tiltText = readFileSync(path.join(deployDir, 'Tiltfile'), 'utf8');
  if (!/^load\('ext:\/\/restart_process', 'docker_build_with_restart'\)/m.test(tiltText))
    problems.push("Tiltfile: does not load('ext://restart_process', 'docker_build_with_restart')");
  if (!build) {
    problems.push("Tiltfile: no docker_build_with_restart('ens', …): a change rebuilds the image");
    return problems;
  }
  const stages = readDockerfile(readFileSync(path.join(deployDir, build.dockerfile), 'utf8'));
  const stageName = (st: (typeof stages)[number]) => /\bAS\s+(\S+)\s*$/i.exec(st[0]!.args)?.[1];
  const stage = stages.find((st) => stageName(st) === build.target);
  if (build.target === undefined || !stage) {
    problems.push(`Tiltfile: target ${build.target} is no stage of ${build.dockerfile}`);
    return problems;
  }
  if (stage === stages.at(-1))
    problems.push(`Dockerfile: the ${build.target} stage is the last, which a plain build makes`);
  const last = (op: string) => stage.filter((i) => i.op === op).at(-1)?.args;
  const workdir = last('WORKDIR') ?? '/';
  const user = last('USER')?.split(':')[0];
  const copied = stage.some(
    (i) =>
      i.op === 'COPY' &&
      !/--from=/.test(i.args) &&
      /(^|\s)\.\s+(\.|\S+)\s*$/.test(i.args) &&
      [workdir, '.', `${workdir}/`].includes(i.args.trim().split(/\s+/).at(-1)!),
  );
  if (!copied)
    problems.push(`Dockerfile: the ${build.target} stage does not copy the context to ${workdir}`);
  const chown = /--chown=(\d+)/.exec(
    stage.find((i) => i.op === 'COPY' && !/--from=/.test(i.args))?.args ?? '',
  )?.[1];
  if (!stage.some((i) => i.op === 'RUN' && /\bnpm ci\b/.test(i.args) && !/--omit=dev/.test(i.args)))
    problems.push(`Dockerfile: the ${build.target} stage does not install the dev dependencies`);

  // Synced paths: each exists, and lands where the stage copied it.
  const context = path.resolve(deployDir, build.context);
  for (const s of build.syncs) {
    const local = path.resolve(deployDir, s.local);
    if (!existsSync(path.join(repoRoot, path.relative(context, local))))
      problems.push(`Tiltfile: sync('${s.local}') names nothing in the repository`);
    const expected = path.posix.join(
      workdir,
      path.relative(context, local).split(path.sep).join('/'),
    );
    if (s.remote !== expected)
      problems.push(
        `Tiltfile: sync('${s.local}', '${s.remote}') but the stage copied it to ${expected}`,
      );
  }
  for (const group of ['packages', 'services', 'plugins', 'apps'])
    if (
      !build.syncs.some((s) => path.relative(context, path.resolve(deployDir, s.local)) === group)
    )
      problems.push(`Tiltfile: ${group}/ is not synced by the live update`);

  // The restart file: written by the child image's `touch` and the live update's `date >` as the
  // stage's user, so it must be where that user may write.
  const restart = build.restartFile ?? '/.restart-proc';
  if (!restart.startsWith(`${workdir}/`) || user === undefined || user !== chown)
    problems.push(
      `Tiltfile: restart_file ${restart} is not in ${workdir} owned by the stage's user ${user}`,
    );

  // The entrypoint: ENS's launcher from source, with the condition that maps @ens/app to src.
  const entry = build.entrypoint ?? [];
  const appPkg = JSON.parse(readFileSync(path.join(repoRoot, 'apps/ens/package.json'), 'utf8'));
  const exported = Object.entries(appPkg.exports?.['.'] ?? {}).find(
    ([, v]) => v === './src/main.ts',
  );
  const main = 'apps/ens/src/main.ts';
  const want = ['node', `--conditions=${exported?.[0]}`, '--import=tsx', main];
  if (entry.join(' ') !== want.join(' '))
    problems.push(`Tiltfile: entrypoint ${JSON.stringify(entry)} is not ${JSON.stringify(want)}`);
  if (!existsSync(path.join(repoRoot, main)))
    problems.push(`Tiltfile: entrypoint runs ${main}, which does not exist`);

  // Each workload of the dev overlay, as Tilt runs it: the overlay's patches applied, `command`
  // replaced by the entrypoint, `args` kept.
  const devDir = path.join(deployDir, 'kubernetes/dev');
  const dev = parseAllDocuments(
    readFileSync(path.join(devDir, 'kustomization.yaml'), 'utf8'),
  )[0]!.toJS();
  const runsImage = (c: { image?: string }) => c.image === 'ens';
  for (const { file, doc: original } of model.kubernetes) {
    if (!['Deployment', 'Job'].includes(original.kind)) continue;
    const doc = structuredClone(original);
    for (const p of dev.patches ?? []) {
      const t = p.target ?? {};
      if (t.kind && t.kind !== doc.kind) continue;
      if (t.name && t.name !== doc.metadata?.name) continue;
      if (t.labelSelector) {
        const [k, v] = String(t.labelSelector).split('=');
        if (doc.metadata?.labels?.[k!] !== v) continue;
      }
      for (const op of parseAllDocuments(p.patch)[0]!.toJS() as any[]) applyJsonPatch(doc, op);
    }
    for (const c of doc.spec.template.spec.containers.filter(runsImage)) {
      const where = `kubernetes/${file} ${doc.kind} ${doc.metadata.name} under Tilt`;
      const args = ((c.args ?? []) as unknown[]).map(String);
      const want =
        doc.kind === 'Job'
          ? ['migrate']
          : ['serve', '--roles', doc.metadata.labels?.['app.kubernetes.io/component']];
      if (args.join(' ') !== want.join(' '))
        problems.push(
          `${where}: runs ${[...entry, ...args].join(' ')}, not ${[...entry, ...want].join(' ')}`,
        );
      if (doc.kind === 'Deployment' && c.securityContext?.readOnlyRootFilesystem !== false)
        problems.push(`${where}: a read-only root filesystem refuses the live update's sync`);
    }
  }
  return problems;
}

export async function checkDeploy(
  model: DeployModel,
  deployDir: string,
  repoRoot: string,
  live: LiveEns,
): Promise<string[]> {
  return [
    ...model.unresolved,
    ...checkVariables(model),
    ...(await checkProcesses(model, repoRoot, live)),
    ...checkKubernetes(model, deployDir),
    ...checkDockerfile(model, repoRoot),
    ...checkTilt(model, deployDir),
    ...checkTiltLiveUpdate(deployDir, repoRoot),
  ];
}
