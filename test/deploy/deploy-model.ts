import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

/*
 * Reads deploy/ (the Dockerfile by line, every Kubernetes YAML, the Tiltfile by regular expressions
 * over its Starlark calls) into one model: the processes the files start, with their command,
 * environment, ports and probes, and every environment variable any file names. Nothing here
 * judges; deploy-checks.ts holds the rules. None of these files can be run where ENS is built
 * (no container runtime, no cluster, no Tilt), so this reading is what checks them.
 */

export interface Probe {
  kind: string;
  path: string;
  /** NaN when a named port matches no declared port (reported in `unresolved`). */
  port: number;
}

export interface DeployedProcess {
  /** File and resource, for messages: `kubernetes/api.yaml Deployment ens-api`. */
  where: string;
  source: 'dockerfile' | 'kubernetes' | 'tilt';
  argv: string[];
  /**
   * Repository-relative directory the command runs in (the image's WORKDIR mirrors the repository).
   */
  dir: string;
  /** What the process is given, a Secret template's placeholders included. */
  env: Record<string, string>;
  /**
   * Ports a container declares; null for a local process, which binds what its environment says.
   */
  containerPorts: number[] | null;
  probes: Probe[];
  /**
   * A long-running server (a Deployment, a serve_cmd) rather than a one-off command (a Job, a cmd).
   */
  server: boolean;
}

export interface NamedVariable {
  name: string;
  where: string;
}

export interface DockerInstruction {
  op: string;
  args: string;
  line: number;
}

export interface KubeDoc {
  file: string;
  /** Parsed YAML of any kind: the checks read it field by field and report what is missing. */
  doc: any;
}

/** A `docker_build(…)` or the restart_process extension's `docker_build_with_restart(…)`. */
export interface TiltDockerBuild {
  call: 'docker_build' | 'docker_build_with_restart';
  image: string;
  context: string;
  dockerfile: string;
  /** The Dockerfile stage built (`target=`); undefined for the last stage. */
  target?: string;
  /** The list form of `entrypoint=`; undefined when absent or not a list of strings. */
  entrypoint?: string[];
  restartFile?: string;
  /** `sync(local, remote)` steps of `live_update=`, as written (local relative to the Tiltfile). */
  syncs: { local: string; remote: string }[];
  fallBackOn: string[];
}

export interface DeployModel {
  processes: DeployedProcess[];
  variables: NamedVariable[];
  /**
   * References that lead nowhere: an envFrom to a missing ConfigMap, a named port no container
   * declares.
   */
  unresolved: string[];
  stages: DockerInstruction[][];
  dockerignore: string[];
  kubernetes: KubeDoc[];
  tilt: {
    portForwards: { resource: string; local: number; container: number }[];
    dockerBuilds: TiltDockerBuild[];
    kustomizeDirs: string[];
  };
}

const words = (s: string) => s.trim().split(/\s+/).filter(Boolean);

/** Lines joined across `\` continuations, comments dropped, split into stages at each FROM. */
export function readDockerfile(text: string): DockerInstruction[][] {
  const stages: DockerInstruction[][] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i]!;
    if (/^\s*(#|$)/.test(line)) continue;
    while (line.trimEnd().endsWith('\\') && i + 1 < lines.length) {
      line = `${line.trimEnd().slice(0, -1)} ${lines[++i]!.replace(/^\s*#.*$/, '')}`;
    }
    const m = /^\s*([A-Za-z]+)\s+([\s\S]*)$/.exec(line);
    if (!m) continue;
    const ins = { op: m[1]!.toUpperCase(), args: m[2]!.trim(), line: start + 1 };
    if (ins.op === 'FROM') stages.push([]);
    stages.at(-1)?.push(ins);
  }
  return stages;
}

/** `["node", "bin/ens.mjs"]` (exec form) or `node bin/ens.mjs` (shell form) as argv. */
export function execForm(args: string): string[] {
  const a = args.trim();
  return a.startsWith('[') ? (JSON.parse(a) as string[]) : words(a);
}

/** `ENV A=1 B=2` (or the old `ENV A 1`). */
function envPairs(args: string): Record<string, string> {
  if (!args.includes('=')) {
    const [k, ...v] = words(args);
    return { [k!]: v.join(' ') };
  }
  const out: Record<string, string> = {};
  for (const m of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("([^"]*)"|'([^']*)'|\S*)/g))
    out[m[1]!] = m[3] ?? m[4] ?? m[2]!;
  return out;
}

function stageOps(stage: DockerInstruction[], op: string): DockerInstruction[] {
  return stage.filter((i) => i.op === op);
}

/** What the image gives every container: its ENV, its ENTRYPOINT and CMD, its EXPOSEd ports. */
export function imageDefaults(stages: DockerInstruction[][]) {
  const runtime = stages.at(-1) ?? [];
  const env: Record<string, string> = {};
  for (const i of stageOps(runtime, 'ENV')) Object.assign(env, envPairs(i.args));
  const last = (op: string) => stageOps(runtime, op).at(-1);
  return {
    env,
    entrypoint: last('ENTRYPOINT') ? execForm(last('ENTRYPOINT')!.args) : [],
    cmd: last('CMD') ? execForm(last('CMD')!.args) : [],
    expose: stageOps(runtime, 'EXPOSE').flatMap((i) =>
      words(i.args).map((p) => Number(p.split('/')[0])),
    ),
    healthcheck: last('HEALTHCHECK')?.args,
  };
}

/**
 * The text between the parentheses of each `name(` call, with nesting and quoted strings respected.
 */
export function callArguments(text: string, name: string): string[] {
  const out: string[] = [];
  const re = new RegExp(`(?<![\\w.])${name}\\(`, 'g');
  for (const m of text.matchAll(re)) {
    let depth = 1;
    let quote: string | null = null;
    let i = m.index + m[0].length;
    const from = i;
    for (; i < text.length && depth > 0; i++) {
      const c = text[i]!;
      if (quote) {
        if (c === '\\') i++;
        else if (c === quote) quote = null;
      } else if (c === '"' || c === "'") quote = c;
      else if (c === '#') i = text.indexOf('\n', i) < 0 ? text.length : text.indexOf('\n', i);
      else if (c === '(' || c === '[' || c === '{') depth++;
      else if (c === ')' || c === ']' || c === '}') depth--;
    }
    out.push(text.slice(from, i - 1));
  }
  return out;
}

const str = `'([^']*)'|"([^"]*)"`;
const strValue = (m: RegExpExecArray | null, at = 1) => (m ? (m[at] ?? m[at + 1]) : undefined);

/** A keyword argument's string value: `serve_cmd='node …'`. */
function kwString(args: string, key: string): string | undefined {
  return strValue(new RegExp(`(?<!\\w)${key}\\s*=\\s*(?:${str})`).exec(args));
}

/**
 * Starlark dict literals assigned to a name: `shared_env = { 'A': 'x', 'B': os.getenv('B', 'y') }`.
 */
function tiltDicts(text: string, variables: NamedVariable[]): Map<string, Record<string, string>> {
  const dicts = new Map<string, Record<string, string>>();
  for (const m of text.matchAll(/^\s*(\w+)\s*=\s*\{([^}]*)\}/gm)) {
    const entries: Record<string, string> = {};
    for (const e of m[2]!.matchAll(
      new RegExp(
        `(?:${str})\\s*:\\s*(?:os\\.getenv\\(\\s*(?:${str})\\s*,\\s*(?:${str})\\s*\\)|(?:${str}))`,
        'g',
      ),
    )) {
      const key = e[1] ?? e[2]!;
      const getenvName = e[3] ?? e[4];
      if (getenvName !== undefined)
        variables.push({ name: getenvName, where: `Tiltfile os.getenv in ${m[1]}` });
      entries[key] = e[5] ?? e[6] ?? e[7] ?? e[8] ?? '';
      variables.push({ name: key, where: `Tiltfile ${m[1]}` });
    }
    dicts.set(m[1]!, entries);
  }
  return dicts;
}

/** `serve_env=dict(shared_env, PORT='8080')`, `env=shared_env` or `env={…}` as a map. */
function tiltEnv(
  args: string,
  key: string,
  dicts: Map<string, Record<string, string>>,
  where: string,
  variables: NamedVariable[],
  unresolved: string[],
): Record<string, string> {
  const named = new RegExp(`(?<!\\w)${key}\\s*=\\s*(\\w+)\\s*[,)\\n]`).exec(`${args}\n`);
  if (named && named[1] !== 'dict') {
    const d = dicts.get(named[1]!);
    if (!d) unresolved.push(`${where}: ${key}=${named[1]} is not a dict the Tiltfile defines`);
    return { ...d };
  }
  const call = new RegExp(`(?<!\\w)${key}\\s*=\\s*dict\\(`).exec(args);
  if (!call) return {};
  const inner =
    callArguments(args.slice(call.index + call[0].length - 'dict('.length), 'dict')[0] ?? '';
  const out: Record<string, string> = {};
  const base = /^\s*(\w+)\s*(,|$)/.exec(inner);
  if (base) {
    const d = dicts.get(base[1]!);
    if (!d) unresolved.push(`${where}: dict(${base[1]}, …) names no dict the Tiltfile defines`);
    Object.assign(out, d);
  }
  for (const kw of inner.matchAll(new RegExp(`(\\w+)\\s*=\\s*(?:${str})`, 'g'))) {
    out[kw[1]!] = kw[2] ?? kw[3]!;
    variables.push({ name: kw[1]!, where });
  }
  return out;
}

function readTiltfile(
  text: string,
  variables: NamedVariable[],
  unresolved: string[],
): Pick<DeployModel, 'processes' | 'tilt'> {
  const dicts = tiltDicts(text, variables);
  const processes: DeployedProcess[] = [];
  for (const args of callArguments(text, 'local_resource')) {
    const name = strValue(new RegExp(`^\\s*(?:${str})`).exec(args)) ?? '?';
    for (const [cmdKey, dirKey, envKey, server] of [
      ['serve_cmd', 'serve_dir', 'serve_env', true],
      ['cmd', 'dir', 'env', false],
    ] as const) {
      const cmd = kwString(args, cmdKey);
      if (cmd === undefined) continue;
      const where = `Tiltfile local_resource ${name} ${cmdKey}`;
      const probes: Probe[] = [];
      for (const h of callArguments(args, 'http_get_action')) {
        probes.push({
          kind: 'readiness_probe',
          path: kwString(h, 'path') ?? '',
          port: Number(/port\s*=\s*(\d+)/.exec(h)?.[1] ?? NaN),
        });
      }
      processes.push({
        where,
        source: 'tilt',
        argv: words(cmd),
        dir: path.normalize(path.join('deploy', kwString(args, dirKey) ?? '.')),
        env: tiltEnv(args, envKey, dicts, where, variables, unresolved),
        containerPorts: null,
        probes: server ? probes : [],
        server,
      });
    }
  }
  const portForwards = callArguments(text, 'k8s_resource').flatMap((args) => {
    const resource = strValue(new RegExp(`^\\s*(?:${str})`).exec(args)) ?? '?';
    return [...args.matchAll(/['"](\d+):(\d+)['"]/g)].map((m) => ({
      resource,
      local: Number(m[1]),
      container: Number(m[2]),
    }));
  });
  const strings = (s: string) => [...s.matchAll(new RegExp(str, 'g'))].map((m) => m[1] ?? m[2]!);
  const dockerBuilds = (['docker_build', 'docker_build_with_restart'] as const).flatMap((call) =>
    callArguments(text, call).map((args): TiltDockerBuild => {
      // The two positional arguments come first, before any keyword argument's string.
      const [image, context] = strings(args.split(/\b\w+\s*=/)[0]!);
      const entry = /(?<!\w)entrypoint\s*=\s*\[([^\]]*)\]/.exec(args);
      return {
        call,
        image: image ?? '',
        context: context ?? '',
        dockerfile: kwString(args, 'dockerfile') ?? 'Dockerfile',
        target: kwString(args, 'target'),
        entrypoint: entry ? strings(entry[1]!) : undefined,
        restartFile: kwString(args, 'restart_file'),
        syncs: callArguments(args, 'sync').map((a) => {
          const [local, remote] = strings(a);
          return { local: local ?? '', remote: remote ?? '' };
        }),
        fallBackOn: callArguments(args, 'fall_back_on').flatMap(strings),
      };
    }),
  );
  const kustomizeDirs = callArguments(text, 'kustomize').map(
    (args) => strValue(new RegExp(str).exec(args)) ?? '',
  );
  return { processes, tilt: { portForwards, dockerBuilds, kustomizeDirs } };
}

/** A ConfigMap's or Secret's keys and values (a Secret's `data` decoded). */
function sourceValues(doc: KubeDoc['doc']): Record<string, string> {
  const out: Record<string, string> = { ...(doc.data ?? {}) };
  if (doc.kind === 'Secret')
    for (const [k, v] of Object.entries(out)) out[k] = Buffer.from(String(v), 'base64').toString();
  return { ...out, ...(doc.stringData ?? {}) };
}

function readKubernetes(
  kubernetes: KubeDoc[],
  image: ReturnType<typeof imageDefaults>,
  variables: NamedVariable[],
  unresolved: string[],
): DeployedProcess[] {
  const sources = new Map<string, Record<string, string>>();
  for (const { file, doc } of kubernetes) {
    if (doc.kind !== 'ConfigMap' && doc.kind !== 'Secret') continue;
    const values = sourceValues(doc);
    sources.set(`${doc.kind}/${doc.metadata?.name}`, values);
    for (const k of Object.keys(values))
      variables.push({ name: k, where: `${file} ${doc.kind} ${doc.metadata?.name}` });
  }
  const lookup = (kind: string, name: string, where: string) => {
    const s = sources.get(`${kind}/${name}`);
    if (!s) unresolved.push(`${where}: refers to ${kind} ${name}, which no file defines`);
    return s ?? {};
  };
  const processes: DeployedProcess[] = [];
  for (const { file, doc } of kubernetes) {
    const pod =
      doc.kind === 'CronJob'
        ? doc.spec?.jobTemplate?.spec?.template?.spec
        : doc.spec?.template?.spec;
    if (!pod) continue;
    for (const c of [...(pod.initContainers ?? []), ...(pod.containers ?? [])]) {
      const where = `kubernetes/${file} ${doc.kind} ${doc.metadata?.name} container ${c.name}`;
      const env: Record<string, string> = { ...image.env };
      for (const from of c.envFrom ?? []) {
        if (from.configMapRef)
          Object.assign(env, lookup('ConfigMap', from.configMapRef.name, where));
        if (from.secretRef) Object.assign(env, lookup('Secret', from.secretRef.name, where));
      }
      for (const e of c.env ?? []) {
        variables.push({ name: e.name, where });
        const ref = e.valueFrom?.configMapKeyRef ?? e.valueFrom?.secretKeyRef;
        if (ref) {
          const values = lookup(
            e.valueFrom.configMapKeyRef ? 'ConfigMap' : 'Secret',
            ref.name,
            where,
          );
          if (!(ref.key in values))
            unresolved.push(
              `${where}: ${e.name} takes key ${ref.key}, which ${ref.name} does not have`,
            );
          env[e.name] = values[ref.key] ?? '';
        } else env[e.name] = String(e.value ?? '');
      }
      const ports = (c.ports ?? []) as { name?: string; containerPort: number }[];
      const portOf = (p: number | string, kind: string) => {
        if (typeof p === 'number') return p;
        const named = ports.find((x) => x.name === p);
        if (!named)
          unresolved.push(
            `${where}: ${kind} uses port "${p}", which the container does not declare`,
          );
        return named ? named.containerPort : NaN;
      };
      const probes: Probe[] = [];
      for (const kind of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
        const get = c[kind]?.httpGet;
        if (get) probes.push({ kind, path: String(get.path ?? ''), port: portOf(get.port, kind) });
      }
      const argv = [
        ...(c.command ?? image.entrypoint),
        ...(c.args ?? (c.command ? [] : image.cmd)),
      ].map(String);
      processes.push({
        where,
        source: 'kubernetes',
        argv,
        dir: '.',
        env,
        containerPorts: ports.map((p) => p.containerPort),
        probes,
        server: doc.kind === 'Deployment',
      });
    }
  }
  return processes;
}

/**
 * Every `ENS_…` name in a file's text, comments included: a comment naming a variable should name a
 * real one.
 */
function ensNamesIn(text: string, file: string): NamedVariable[] {
  return [...text.matchAll(/\bENS_[A-Z0-9_]+\b/g)].map((m) => ({
    name: m[0],
    where: `${file} (text)`,
  }));
}

export function readDeploy(deployDir: string): DeployModel {
  const variables: NamedVariable[] = [];
  const unresolved: string[] = [];
  const read = (f: string) => readFileSync(path.join(deployDir, f), 'utf8');

  const dockerText = read('Dockerfile');
  const stages = readDockerfile(dockerText);
  const image = imageDefaults(stages);
  variables.push(...ensNamesIn(dockerText, 'Dockerfile'));
  for (const k of Object.keys(image.env)) variables.push({ name: k, where: 'Dockerfile ENV' });
  for (const m of (image.healthcheck ?? '').matchAll(/process\.env\.(\w+)/g))
    variables.push({ name: m[1]!, where: 'Dockerfile HEALTHCHECK' });

  const processes: DeployedProcess[] = [];
  // The image's own default process (`docker run` without a command): the HEALTHCHECK is its probe,
  // on the first port variable the check reads that the image sets.
  const checkVars = [...(image.healthcheck ?? '').matchAll(/process\.env\.(\w+)/g)].map(
    (m) => m[1]!,
  );
  const checkPortVar = checkVars.find((v) => image.env[v] !== undefined);
  processes.push({
    where: 'Dockerfile ENTRYPOINT + CMD',
    source: 'dockerfile',
    argv: [...image.entrypoint, ...image.cmd],
    dir: '.',
    env: { ...image.env },
    containerPorts: image.expose,
    probes: image.healthcheck
      ? [...image.healthcheck.matchAll(/'[^']*?(\/[a-z]+)'/g)].map((m) => ({
          kind: 'HEALTHCHECK',
          path: m[1]!,
          port: Number(checkPortVar ? image.env[checkPortVar] : NaN),
        }))
      : [],
    server: true,
  });

  const kubeDir = path.join(deployDir, 'kubernetes');
  const kubernetes: KubeDoc[] = [];
  for (const file of readdirSync(kubeDir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()) {
    const text = readFileSync(path.join(kubeDir, file), 'utf8');
    variables.push(...ensNamesIn(text, `kubernetes/${file}`));
    for (const d of parseAllDocuments(text)) {
      if (d.errors.length > 0) unresolved.push(`kubernetes/${file}: ${d.errors[0]!.message}`);
      const doc = d.toJS();
      if (doc) kubernetes.push({ file, doc });
    }
  }
  processes.push(...readKubernetes(kubernetes, image, variables, unresolved));

  const tiltText = read('Tiltfile');
  variables.push(...ensNamesIn(tiltText, 'Tiltfile'));
  const tilt = readTiltfile(tiltText, variables, unresolved);
  processes.push(...tilt.processes);

  const ignoreFile = path.join(deployDir, '..', '.dockerignore');
  const dockerignore = existsSync(ignoreFile)
    ? readFileSync(ignoreFile, 'utf8')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith('#'))
    : [];
  return { processes, variables, unresolved, stages, dockerignore, kubernetes, tilt: tilt.tilt };
}
