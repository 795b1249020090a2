/**
 * Issue 27's CPU row, measured the only way that carries from one machine to another: ENS's
 * PostgreSQL CPU per delivery against the start (4bde695), in alternating pairs in the
 * same minutes, both measured by today's bench:wal. The row is "≤ 0.08 ms (about half of today's)"
 * on the machine, where the start cost 0.154 ms: a ratio of 0.08 / 0.154 = 0.52. The
 * start has cost from 0.15 to 0.45 ms per delivery on the machines it ran on, so an absolute
 * figure from any other machine says little.
 *
 *   npm run bench:wal-pairs                      five pairs, stock PostgreSQL, callbacks on
 *   WAL_PAIRS=3 WAL_START=<commit>               fewer pairs, another start
 *   WAL_CONFIG=project WAL_CALLBACKS=off         passed on to both sides' bench:wal
 *
 * The start is `git archive`d into a temporary folder (under node_modules/.cache) with this
 * checkout's test/bench copied over it and node_modules hard-linked (its workspace links are
 * relative, so they name the start's own packages). Needs git and a checkout that has the start
 * commit.
 */
import { spawn, execFileSync } from 'node:child_process';
import { cp, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { installSignalHandlers, onCleanup, runCleanup } from './cleanup.ts';
import { progress } from './log.ts';
import { median } from './stats.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The 0.08 ms against the start's 0.154 ms on the machine. */
const TARGET_RATIO = 0.08 / 0.154;

interface Side {
  /** PostgreSQL CPU per delivery over every handoff, ms. */
  cpuMs: number;
  walKb: number;
  /** Each handoff's PostgreSQL CPU per delivery (ms) and wall time (s). */
  handoffs: { cpuMs: number; s: number }[];
}

/** Parses the first configuration's summary line of bench:wal's output. */
export function parseWal(stdout: string): Side {
  const line = stdout.split('\n').find((l) => l.includes('ms PostgreSQL CPU/delivery**'));
  const cpu = line && /\*\*([\d.]+) ms PostgreSQL CPU\/delivery\*\*/.exec(line);
  const wal = line && /\*\*([\d.]+) KB WAL\/delivery\*\*/.exec(line);
  if (!line || !cpu || !wal) throw new Error(`no bench:wal summary in its output:\n${stdout}`);
  const per = line.split('per handoff: ')[1] ?? '';
  const handoffs = [...per.matchAll(/[\d.]+ KB, ([\d.]+) ms, ([\d.]+) s/g)].map((m) => ({
    cpuMs: Number(m[1]),
    s: Number(m[2]),
  }));
  return { cpuMs: Number(cpu[1]), walKb: Number(wal[1]), handoffs };
}

function benchWal(cwd: string, env: NodeJS.ProcessEnv): Promise<Side> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--conditions=ens-source', '--import=tsx', 'test/bench/wal.ts'],
      { cwd, env, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`bench:wal in ${cwd} exited with ${code}`));
      else {
        try {
          resolve(parseWal(out));
        } catch (err) {
          reject(err);
        }
      }
    });
  });
}

async function main(): Promise<void> {
  installSignalHandlers();
  const pairs = Number(process.env.WAL_PAIRS ?? 5);
  if (!Number.isInteger(pairs) || pairs < 1)
    throw new Error(`WAL_PAIRS: a whole number of pairs, 1 or more (got ${process.env.WAL_PAIRS})`);
  const start = process.env.WAL_START ?? '4bde695';
  const env = {
    ...process.env,
    WAL_CONFIG: process.env.WAL_CONFIG ?? 'stock',
    WAL_CALLBACKS: process.env.WAL_CALLBACKS ?? 'on',
  };
  if (env.WAL_CONFIG.includes(',')) throw new Error('WAL_CONFIG: one configuration at a time');
  // Inside this checkout's node_modules/.cache: hard links need the same filesystem, and /tmp
  // is often another one.
  const cache = path.join(root, 'node_modules', '.cache');
  await mkdir(cache, { recursive: true });
  const dir = await mkdtemp(path.join(cache, 'ens-wal-start-'));
  onCleanup('the start checkout', () => rm(dir, { recursive: true, force: true }));
  progress(`wal-pairs: ${start} into ${dir}`);
  const archive = execFileSync('git', ['archive', start], { cwd: root, maxBuffer: 1 << 30 });
  execFileSync('tar', ['-x', '-C', dir], { input: archive });
  await rm(path.join(dir, 'test', 'bench'), { recursive: true, force: true });
  await cp(path.join(root, 'test', 'bench'), path.join(dir, 'test', 'bench'), { recursive: true });
  // Every entry but .cache, which holds this folder.
  const modules = (await readdir(path.join(root, 'node_modules'))).filter((e) => e !== '.cache');
  await mkdir(path.join(dir, 'node_modules'));
  execFileSync('cp', [
    '-al',
    ...modules.map((e) => path.join(root, 'node_modules', e)),
    path.join(dir, 'node_modules'),
  ]);

  const rows: { start: Side; now: Side; ratio: number }[] = [];
  for (let i = 1; i <= pairs; i++) {
    progress(`wal-pairs: pair ${i}/${pairs}: the start (${start})`);
    const s = await benchWal(dir, env);
    progress(`wal-pairs: pair ${i}/${pairs}: now`);
    const n = await benchWal(root, env);
    const ratio = n.cpuMs / s.cpuMs;
    rows.push({ start: s, now: n, ratio });
    progress(
      `wal-pairs: pair ${i}/${pairs}: ${s.cpuMs.toFixed(3)} → ${n.cpuMs.toFixed(3)} ms per delivery (${ratio.toFixed(2)})`,
    );
  }
  const mid = median(rows.map((r) => r.ratio));
  const each = (x: Side) => x.handoffs.map((h) => `${h.cpuMs.toFixed(3)}`).join(', ');
  const walls = (x: Side) => x.handoffs.map((h) => `${h.s.toFixed(1)}`).join('/');
  process.stdout.write(
    [
      `**PostgreSQL CPU per delivery against ${start}** (${env.WAL_CONFIG} PostgreSQL, callbacks ${env.WAL_CALLBACKS}, ${pairs} alternating pairs): ` +
        `median ${mid.toFixed(2)} of the start; target ≤ ${TARGET_RATIO.toFixed(2)} (0.08 ms against the start's 0.154 ms on the issue's machine): **${mid <= TARGET_RATIO ? 'met' : 'NOT met'}**`,
      '',
      "| pair | the start, per handoff (ms) | now, per handoff (ms) | now / start | on the issue's machine (0.154 ms × ratio) | WAL, start → now | handoff walls (s), start → now |",
      '| --- | --- | --- | --- | --- | --- | --- |',
      ...rows.map(
        (r, i) =>
          `| ${i + 1} | ${each(r.start)} | ${each(r.now)} | ${r.ratio.toFixed(2)} | ${(0.154 * r.ratio).toFixed(3)} ms | ${r.start.walKb.toFixed(2)} → ${r.now.walKb.toFixed(2)} KB | ${walls(r.start)} → ${walls(r.now)} |`,
      ),
      '',
    ].join('\n'),
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main()
    .then(
      () => runCleanup(),
      async (err: unknown) => {
        progress(`wal-pairs FAILED: ${(err as Error).stack ?? String(err)}`);
        await runCleanup();
        process.exitCode = 1;
      },
    )
    .finally(() => process.exit());
}
