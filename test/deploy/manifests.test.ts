import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { parseAllDocuments } from 'yaml';
import { ConfigError, loadConfig } from '@ens/core';
import { allVariables } from '@ens/core/internal';
import { freePort } from '@ens/local-engines';
import { ENS_ARGV } from '../harness/ens-process.ts';
import { startTestEngines } from '../harness/engines.ts';
import { runEns } from '../harness/ens-process.ts';
import { startS3Server } from '../harness/s3-server.ts';
import {
  checkDeploy,
  checkTiltLiveUpdate,
  ensCommand,
  portVariable,
  type HealthServer,
  type LiveEns,
} from './deploy-checks.ts';
import { readDeploy, type DeployedProcess } from './deploy-model.ts';

/*
 * deploy/ (Dockerfile, Kubernetes manifests, Tiltfile) cannot be run where ENS is developed: no
 * container runtime, cluster or Tilt works there. So this reads every file and holds what it names
 * against ENS: the manifests' own commands and environments are run as real ENS processes
 * (against the harness's PostgreSQL, NATS and S3, standing in for the external ones), every probe
 * path is asked of them, and every command, role, port and variable is checked against the code.
 * Deliberately wrong copies show that each kind of mistake is caught.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const deployDir = path.join(root, 'deploy');

interface Running {
  process: DeployedProcess;
  port: number;
  child: ChildProcess;
  output: () => string;
}

/** Polls /readyz until 200; fails with the process's output when it exits or takes too long. */
async function untilReady(r: Running, timeoutMs = 90_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const status = await fetch(`http://127.0.0.1:${r.port}/readyz`, {
      signal: AbortSignal.timeout(2000),
    }).then(
      (x) => x.status,
      () => 0,
    );
    if (status === 200) return;
    if (r.child.exitCode !== null)
      throw new Error(`${r.process.where} exited ${r.child.exitCode}:\n${r.output().slice(-2000)}`);
    if (Date.now() > until)
      throw new Error(
        `${r.process.where} not ready within ${timeoutMs} ms:\n${r.output().slice(-2000)}`,
      );
    await new Promise((res) => setTimeout(res, 200));
  }
}

t.test('deploy/ against a running ENS', async (t) => {
  const model = readDeploy(deployDir);
  const engines = await startTestEngines(t);
  const configMap = model.kubernetes.find((d) => d.doc.kind === 'ConfigMap')!.doc.data as Record<
    string,
    string
  >;
  const s3 = await startS3Server(t, {
    bucket: configMap.ENS_S3_BUCKET,
    region: configMap.ENS_S3_REGION,
  });
  const scratch = await mkdtemp(path.join(tmpdir(), 'ens-deploy-test-'));
  t.teardown(() => rm(scratch, { recursive: true, force: true }));
  // ENS_DATA_DIR points where nothing exists: the pods mount no volume there, so ENS must not write
  // it.
  const dataDir = path.join(scratch, 'data-dir-never-created');
  const masterKey = randomBytes(32).toString('base64');

  /**
   * The process's environment as the manifests give it, with the external services replaced by
   * the harness's: the Secret's URLs and keys, the bucket's endpoint, and free ports on loopback
   * (a pod binds 0.0.0.0 on its own address; here that would be the shared machine's).
   */
  const runEnv = (
    p: DeployedProcess,
    port?: { name: string; value: number },
  ): Record<string, string> => ({
    PATH: process.env.PATH ?? '',
    ...p.env,
    DATABASE_URL: engines.databaseUrl,
    NATS_URL: engines.natsUrl,
    ENS_MASTER_KEY: masterKey,
    AWS_ACCESS_KEY_ID: s3.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3.credentials.secretAccessKey,
    ENS_S3_ENDPOINT: s3.endpoint,
    ENS_S3_FORCE_PATH_STYLE: 'true',
    HOST: '127.0.0.1',
    ENS_DATA_DIR: dataDir,
    // The pod's /tmp emptyDir.
    TMPDIR: scratch,
    ENS_LOG_LEVEL: 'warn',
    // The return-path domain the ConfigMap leaves to the operator, so that the inbound Deployment's
    // process really listens, on a free port rather than the manifest's 2525 on the shared machine.
    ENS_RETURN_PATH_DOMAIN: 'bounces.example.com',
    ...(p.env.ENS_INBOUND_PORT !== undefined ? { ENS_INBOUND_PORT: '0' } : {}),
    ...(port ? { [port.name]: String(port.value) } : {}),
  });
  // The manifests run `node bin/ens.mjs …` on the built code; here the same arguments go to the
  // source, so a stale dist/ in a shared checkout is never what is checked.
  const ensArgv = (p: DeployedProcess) => {
    if (p.argv[0] !== 'node' || p.argv[1] !== 'bin/ens.mjs')
      throw new Error(`${p.where} does not run the ens launcher: ${p.argv.join(' ')}`);
    return [...ENS_ARGV, ...p.argv.slice(2)];
  };

  const kube = model.processes.filter((p) => p.source === 'kubernetes');
  const job = kube.find((p) => !p.server && ensCommand(p)?.command === 'migrate');
  const deployments = kube.filter((p) => p.server);
  t.ok(job, 'a Job runs ens migrate');
  t.equal(deployments.length, 5, 'five Deployments, one per role');

  await t.test("the migration Job's command migrates an empty database", async (t) => {
    const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>(
      (resolve) => {
        const c = spawn(process.execPath, ensArgv(job!), {
          cwd: root,
          env: runEnv(job!),
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        c.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
        c.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        c.on('exit', (code) => resolve({ code, stdout, stderr }));
      },
    );
    t.equal(out.code, 0, `exit 0 ${out.stderr.slice(-500)}`);
    t.ok(
      (JSON.parse(out.stdout) as { applied: string[] }).applied.length > 0,
      'it applied the migrations',
    );
  });

  const running: Running[] = [];
  t.teardown(async () => {
    for (const r of running) r.child.kill('SIGKILL');
  });
  for (const p of deployments) {
    const roles = ensCommand(p)?.roles ?? [];
    const port = { name: portVariable(roles), value: await freePort() };
    const child = spawn(process.execPath, ensArgv(p), {
      cwd: root,
      env: runEnv(p, port),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
    child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-20_000)));
    const r: Running = { process: p, port: port.value, child, output: () => out };
    running.push(r);
    await untilReady(r);
  }

  await t.test('every probe of every Deployment answers 200 on the process it runs', async (t) => {
    for (const r of running) {
      const p = r.process;
      t.ok(p.probes.length >= 2, `${p.where} has probes`);
      for (const probe of p.probes) {
        const res = await fetch(`http://127.0.0.1:${r.port}${probe.path}`);
        t.equal(
          res.status,
          200,
          `${p.where} ${probe.kind} ${probe.path}: ${res.status} ${res.status === 200 ? '' : await res.text()}`,
        );
      }
    }
  });

  const serverPort = (server: HealthServer) =>
    running.find(
      (r) => (ensCommand(r.process)?.roles ?? []).includes('api') === (server === 'api'),
    )!.port;
  const help = await runEns(['--help'], {});
  const live: LiveEns = {
    commands: new Set([...help.stdout.matchAll(/^\s+ens (\w+)/gm)].map((m) => m[1]!)),
    async routeExists(server, urlPath) {
      const res = await fetch(`http://127.0.0.1:${serverPort(server)}${urlPath}`);
      await res.arrayBuffer();
      return res.status !== 404;
    },
  };

  await t.test(
    'every command, role, port, probe path and variable in deploy/ is one ENS has',
    async (t) => {
      t.ok(
        live.commands.has('serve') && live.commands.has('migrate'),
        'ens --help lists serve and migrate',
      );
      t.same(await checkDeploy(model, deployDir, root, live), [], 'no problem');
      t.ok(
        model.processes.some((p) => p.source === 'tilt' && p.server),
        'the Tiltfile was read',
      );
      t.ok(
        model.processes.some((p) => p.source === 'dockerfile' && p.probes.length > 0),
        "the Dockerfile's HEALTHCHECK was read",
      );
    },
  );

  await t.test(
    'no process wrote ENS_DATA_DIR (so the root filesystem can be read-only)',
    async (t) => {
      t.notOk(existsSync(dataDir), `${dataDir} was not created`);
    },
  );

  await t.test(
    'the Secret template as it stands stops ENS with a configuration error',
    async (t) => {
      const secret = model.kubernetes.find((d) => d.doc.kind === 'Secret')!.doc
        .stringData as Record<string, string>;
      t.throws(
        () => loadConfig({ ...configMap, ...secret }),
        ConfigError,
        'placeholders are refused at start-up',
      );
      for (const key of ['DATABASE_URL', 'NATS_URL', 'ENS_MASTER_KEY'])
        t.match(secret[key], /CHANGE-ME/, `${key} is a placeholder to fill`);
    },
  );

  await t.test('a deliberately wrong copy of deploy/ is caught', async (t) => {
    const wrong = async (file: string, from: string, to: string): Promise<string[]> => {
      const dir = await mkdtemp(path.join(scratch, 'wrong-'));
      await cp(deployDir, path.join(dir, 'deploy'), { recursive: true });
      await cp(path.join(root, '.dockerignore'), path.join(dir, '.dockerignore'));
      const target = path.join(dir, 'deploy', file);
      const text = await readFile(target, 'utf8');
      if (!text.includes(from)) throw new Error(`${file} does not contain ${JSON.stringify(from)}`);
      await writeFile(target, text.replace(from, to));
      return checkDeploy(
        readDeploy(path.join(dir, 'deploy')),
        path.join(dir, 'deploy'),
        root,
        live,
      );
    };
    const cases: [string, string, string, RegExp][] = [
      [
        'kubernetes/worker.yaml',
        '"--roles", "worker"',
        '"--roles", "wroker"',
        /"wroker" is not one/,
      ],
      [
        'kubernetes/worker.yaml',
        '"--roles", "worker"',
        '"--roles", "wroker"',
        /0 Deployments run the worker role/,
      ],
      [
        'kubernetes/callbacks.yaml',
        '- name: ENS_HEALTH_PORT',
        '- name: ENS_HEALTHPORT',
        /ENS_HEALTHPORT is not a variable ENS reads/,
      ],
      [
        'kubernetes/callbacks.yaml',
        '- name: ENS_HEALTH_PORT',
        '- name: ENS_HEALTHPORT',
        /serve their probes on ENS_HEALTH_PORT, which is not set/,
      ],
      [
        'kubernetes/feed.yaml',
        'containerPort: 9090',
        'containerPort: 9091',
        /ENS_HEALTH_PORT=9090 but the ports declared are 9091/,
      ],
      [
        'kubernetes/api.yaml',
        'path: /readyz',
        'path: /ready',
        /readinessProbe path \/ready is not a route of the api server/,
      ],
      [
        'kubernetes/worker.yaml',
        'path: /healthz',
        'path: /health',
        /path \/health is not a route of the health server/,
      ],
      [
        'kubernetes/api.yaml',
        'path: /healthz\n              port: http',
        'path: /healthz\n              port: web',
        /uses port "web", which the container does not declare/,
      ],
      [
        'kubernetes/migrate-job.yaml',
        'args: ["migrate"]',
        'args: ["migrations"]',
        /`ens migrations` is not an ens command/,
      ],
      [
        'kubernetes/configmap.yaml',
        'ENS_S3_BUCKET:',
        'ENS_S3_BUCKETS:',
        /ENS_S3_BUCKETS is not a variable ENS reads/,
      ],
      [
        'kubernetes/configmap.yaml',
        'ENS_NATS_REPLICAS: "1"',
        'ENS_NATS_REPLICAS: "9"',
        /ENS refuses this configuration: .*ENS_NATS_REPLICAS/,
      ],
      [
        'kubernetes/configmap.yaml',
        'name: ens-config',
        'name: ens-settings',
        /refers to ConfigMap ens-config, which no file defines/,
      ],
      [
        'kubernetes/pdb.yaml',
        '      app.kubernetes.io/component: feed',
        '      app.kubernetes.io/component: feeds',
        /no PodDisruptionBudget covers Deployment ens-feed/,
      ],
      [
        'Tiltfile',
        'http_get_action(port=9092',
        'http_get_action(port=9099',
        /readiness_probe \/readyz goes to port 9099, but ENS_HEALTH_PORT=9092/,
      ],
      [
        'Tiltfile',
        "serve_cmd='node bin/ens.mjs serve --roles feed'",
        "serve_cmd='node bin/ens.js serve --roles feed'",
        /runs node bin\/ens.js, not the ens launcher/,
      ],
      [
        'Tiltfile',
        "'NATS_URL': os.getenv('NATS_URL'",
        "'NATS_URI': os.getenv('NATS_URI'",
        /NATS_URI is not a variable ENS reads/,
      ],
      [
        'Tiltfile',
        "path='/readyz')),\n    )\n    local_resource(\n        'ens-feed'",
        "path='/readiness')),\n    )\n    local_resource(\n        'ens-feed'",
        /path \/readiness is not a route of the health server/,
      ],
      ['Dockerfile', 'EXPOSE 8080', 'EXPOSE 8000', /PORT=8080 but the ports declared are 8000/],
      ['Dockerfile', 'USER 1000:1000', 'USER root', /the runtime stage runs as root/],
      [
        'Dockerfile',
        'COPY --from=build /out /app',
        'COPY . /app',
        /the runtime stage copies from the build context/,
      ],
      [
        '../.dockerignore',
        'deploy\n',
        'deploy\nscripts\n',
        /"scripts" keeps scripts\/build.mjs out of the build context/,
      ],
      ['kubernetes/kustomization.yaml', '  - feed.yaml\n', '', /does not list feed.yaml/],
    ];
    for (const [file, from, to, expected] of cases) {
      const problems = await wrong(file, from, to);
      t.ok(
        problems.some((p) => expected.test(p)),
        `${file}: ${JSON.stringify(from)} → ${JSON.stringify(to)} is reported as ${expected}`,
        { problems },
      );
    }
  });
});

t.test(
  'the image takes third-party plugins by a build argument, into ENS_PLUGIN_DIR',
  async (t) => {
    // Found when a plugin could only be added by editing the repository's package.json.
    const dockerfile = await readFile(path.join(root, 'deploy/Dockerfile'), 'utf8');
    t.match(dockerfile, /^ARG PLUGINS=""$/m, 'a PLUGINS build argument');
    const dir = /^ENV ENS_PLUGIN_DIR=\/app\/(\S+)$/m.exec(dockerfile)?.[1];
    t.ok(dir, 'the runtime image sets ENS_PLUGIN_DIR under /app');
    t.match(dockerfile, `mkdir -p /out/${dir}`, 'to the directory the build stage fills');
    t.match(dockerfile, /npm install [^\n]*\$PLUGINS/, 'with the plugins the argument names');
    t.ok(
      allVariables().some((v) => v.name === 'ENS_PLUGIN_DIR'),
      'ENS_PLUGIN_DIR is a variable ENS reads',
    );
  },
);

t.test(
  'the Tiltfile and the development overlay agree on names, images and resources',
  async (t) => {
    // Found as: --cluster renamed the image so Tilt's build was never used, and the engines and the
    // Secret came from nowhere; local role resources had no file dependencies.
    const k8s = path.join(root, 'deploy/kubernetes');
    const tiltfile = await readFile(path.join(root, 'deploy/Tiltfile'), 'utf8');
    const docs = async (f: string) =>
      parseAllDocuments(await readFile(f, 'utf8')).map((d) => d.toJS()) as any[];
    const base = (await docs(path.join(k8s, 'kustomization.yaml')))[0];
    const dev = (await docs(path.join(k8s, 'dev/kustomization.yaml')))[0];

    const built = /docker_build(?:_with_restart)?\(\s*'([^']+)'/.exec(tiltfile)?.[1];
    const baseImage = base.images[0];
    t.equal(dev.images[0].name, baseImage.newName, "the overlay renames the base's image");
    t.equal(dev.images[0].newName, built, "to the image Tilt builds (docker_build('ens'))");
    t.match(tiltfile, "k8s_yaml(kustomize('kubernetes/dev'))", 'Tilt applies the overlay');

    const workloads: any[] = [];
    for (const f of [...base.resources, ...dev.resources.filter((r: string) => r !== '../')]) {
      const file = base.resources.includes(f) ? path.join(k8s, f) : path.join(k8s, 'dev', f);
      workloads.push(
        ...(await docs(file)).filter((d) => d && ['Deployment', 'Job'].includes(d.kind)),
      );
    }
    for (const w of workloads)
      for (const c of w.spec.template.spec.containers)
        if (c.command?.[1] === 'bin/ens.mjs')
          t.equal(c.image, baseImage.name, `${w.metadata.name} runs the image the overlay renames`);
    const cluster = tiltfile.slice(
      tiltfile.indexOf("if cfg.get('cluster'"),
      tiltfile.indexOf('else:'),
    );
    const named = new Set<string>();
    for (const m of cluster.matchAll(/k8s_resource\(\s*'([^']+)'/g)) named.add(m[1]!);
    t.same(
      [...named].sort(),
      workloads.map((w) => w.metadata.name).sort(),
      'every workload of the overlay is a Tilt resource, and every Tilt resource a workload',
    );

    const secret = (await docs(path.join(k8s, 'dev/secret.yaml')))[0];
    const template = (await docs(path.join(k8s, 'secret.template.yaml')))[0];
    t.same(
      Object.keys(secret.stringData).sort(),
      Object.keys(template.stringData).sort(),
      'the development Secret has the keys of the template',
    );
    const services = (await docs(path.join(k8s, 'dev/engines.yaml')))
      .filter((d) => d.kind === 'Service')
      .map((d) => `${d.metadata.name}:${d.spec.ports[0].port}`);
    const configMap = (await docs(path.join(k8s, 'configmap.yaml')))[0].data;
    const patched = { ...configMap };
    for (const op of parseAllDocuments(dev.patches[0].patch)[0]!.toJS() as any[])
      patched[op.path.replace('/data/', '')] = op.value;
    for (const url of [
      secret.stringData.DATABASE_URL,
      secret.stringData.NATS_URL,
      patched.ENS_S3_ENDPOINT,
    ])
      t.ok(
        services.includes(new URL(url).host),
        `${new URL(url).host} is a Service of the overlay`,
      );
    t.doesNotThrow(
      () => loadConfig({ ...patched, ...secret.stringData }),
      'ENS takes the settings',
    );

    const roles = [
      ...tiltfile.matchAll(/local_resource\(\s*'(ens-[a-z]+)'[\s\S]*?(?=local_resource\(|$)/g),
    ];
    t.equal(roles.length, 5, 'five local role resources');
    for (const r of roles)
      t.match(r[0], 'deps=role_deps', `${r[1]} restarts when its code is rebuilt`);
  },
);

t.test('--cluster is a live update that keeps every role', async (t) => {
  // Found as: a source change rebuilt the whole image (npm ci inside) and rolled every role.
  t.same(checkTiltLiveUpdate(deployDir, root), [], 'no problem');
  const build = readDeploy(deployDir).tilt.dockerBuilds.find(
    (b) => b.call === 'docker_build_with_restart',
  );
  // The same condition and entry as the harness; the loader differs (tsx there, the suite's own
  // here: test/harness/loader says why).
  const notLoader = (a: string) => !a.startsWith('--import=');
  t.same(
    build?.entrypoint?.slice(1).filter(notLoader),
    ENS_ARGV.filter(notLoader).map((a) => (path.isAbsolute(a) ? path.relative(root, a) : a)),
    "the entrypoint runs ENS from source as the tests' harness does",
  );
  t.ok(build?.entrypoint?.includes('--import=tsx'), 'with tsx, which the image has');

  const scratch = await mkdtemp(path.join(tmpdir(), 'ens-tilt-test-'));
  t.teardown(() => rm(scratch, { recursive: true, force: true }));
  const wrong = async (file: string, from: string | RegExp, to: string) => {
    const dir = await mkdtemp(path.join(scratch, 'wrong-'));
    await cp(deployDir, dir, { recursive: true });
    const text = await readFile(path.join(dir, file), 'utf8');
    const changed = text.replace(from, to);
    if (changed === text) throw new Error(`${file} does not contain ${String(from)}`);
    await writeFile(path.join(dir, file), changed);
    return checkTiltLiveUpdate(dir, root);
  };
  const cases: [string, string | RegExp, string, RegExp][] = [
    [
      'Tiltfile',
      /docker_build_with_restart\(\n {8}'ens'[\s\S]*?\n {4}\)\n/,
      "docker_build('ens', '..', dockerfile='Dockerfile', ignore=['**/dist', '**/test', '.ens'])\n",
      /no docker_build_with_restart/,
    ],
    ['Tiltfile', "target='dev'", "target='develop'", /target develop is no stage/],
    ['Dockerfile', 'AS dev\n', 'AS development\n', /target dev is no stage/],
    [
      'Tiltfile',
      "sync('../services', '/src/services')",
      "sync('../services', '/app/services')",
      /but the stage copied it to \/src\/services/,
    ],
    ['Tiltfile', "sync('../apps', '/src/apps'),", '', /apps\/ is not synced/],
    ['Tiltfile', "sync('../plugins',", "sync('../plugin',", /names nothing in the repository/],
    [
      'Tiltfile',
      "'--conditions=ens-source', ",
      '',
      /entrypoint .* is not \["node","--conditions=ens-source"/,
    ],
    [
      'Tiltfile',
      "restart_file='/src/.restart-proc'",
      "restart_file='/.restart-proc'",
      /restart_file/,
    ],
    [
      'kubernetes/worker.yaml',
      /command: \["node", "bin\/ens.mjs"\]\n.*\n\s*args: \["serve", "--roles", "worker"\]/,
      'command: ["node", "bin/ens.mjs", "serve", "--roles", "worker"]',
      /ens-worker under Tilt: runs .*main\.ts, not .*main\.ts serve --roles worker/,
    ],
    [
      'kubernetes/feed.yaml',
      'args: ["serve", "--roles", "feed"]',
      'args: ["serve"]',
      /ens-feed under Tilt: runs .*main\.ts serve, not/,
    ],
    [
      'kubernetes/dev/kustomization.yaml',
      'labelSelector: app.kubernetes.io/name=ens',
      'labelSelector: app.kubernetes.io/name=ens-engines',
      /read-only root filesystem refuses/,
    ],
  ];
  for (const [file, from, to, expected] of cases) {
    const problems = await wrong(file, from, to);
    t.ok(
      problems.some((p) => expected.test(p)),
      `${file}: ${String(from).slice(0, 60)} → ${JSON.stringify(to).slice(0, 60)} is reported as ${expected}`,
      { problems },
    );
  }
});
