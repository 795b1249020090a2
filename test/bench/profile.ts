import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  file: string;
  totalMs: number;
  /** Share of sampled time that was not idle. */
  busyMs: number;
  topFunctions: { name: string; where: string; selfMs: number; pctOfBusy: number }[];
  byPackage: { pkg: string; selfMs: number; pctOfBusy: number }[];
}

const SPECIAL = new Set(['(idle)', '(program)', '(garbage collector)', '(root)']);

/** Which package a frame belongs to: an npm package, an ENS workspace, node's own code, or V8. */
function packageOf(url: string, fn: string): string {
  if (SPECIAL.has(fn) && !url) return fn;
  if (!url) return '(native / V8)';
  if (url.startsWith('node:')) return 'node: (core)';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const ws = /\/(packages|services|plugins)\/([^/]+)\//.exec(url);
  if (ws) return `ENS ${ws[1]}/${ws[2]}`;
  return url;
}

function shortUrl(url: string): string {
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) return url.slice(nm + '/node_modules/'.length);
  const ws = /\/((?:packages|services|plugins)\/.*)$/.exec(url);
  return ws ? ws[1]! : url.replace(/^file:\/\//, '');
}

/** Self time per function and per package of one .cpuprofile. */
export async function summariseProfile(file: string, top = 20): Promise<ProfileSummary> {
  const p = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  // timeDeltas[i] is the time between sample i-1 and sample i; charge it to sample i's frame.
  for (let i = 0; i < p.samples.length; i++)
    selfUs.set(p.samples[i]!, (selfUs.get(p.samples[i]!) ?? 0) + Math.max(0, p.timeDeltas[i] ?? 0));
  const fnTotals = new Map<string, { name: string; where: string; us: number }>();
  const pkgTotals = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, us] of selfUs) {
    const n = byId.get(id);
    if (!n) continue;
    const { functionName, url, lineNumber } = n.callFrame;
    const name = functionName || '(anonymous)';
    total += us;
    if (name === '(idle)') {
      idle += us;
      continue;
    }
    const where = url ? `${shortUrl(url)}:${lineNumber + 1}` : '';
    const key = `${name} ${where}`;
    const f = fnTotals.get(key) ?? { name, where, us: 0 };
    f.us += us;
    fnTotals.set(key, f);
    const pkg = packageOf(url, name);
    pkgTotals.set(pkg, (pkgTotals.get(pkg) ?? 0) + us);
  }
  const busy = total - idle;
  const pct = (us: number) => Number(((100 * us) / Math.max(1, busy)).toFixed(1));
  return {
    file,
    totalMs: Math.round(total / 1000),
    busyMs: Math.round(busy / 1000),
    topFunctions: [...fnTotals.values()]
      .sort((a, b) => b.us - a.us)
      .slice(0, top)
      .map((f) => ({
        name: f.name,
        where: f.where,
        selfMs: Math.round(f.us / 1000),
        pctOfBusy: pct(f.us),
      })),
    byPackage: [...pkgTotals.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 15)
      .map(([pkg, us]) => ({ pkg, selfMs: Math.round(us / 1000), pctOfBusy: pct(us) })),
  };
}

export async function summariseProfiles(dir: string): Promise<ProfileSummary[]> {
  const files = (await readdir(dir).catch(() => [] as string[]))
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort();
  return Promise.all(files.map((f) => summariseProfile(path.join(dir, f))));
}

export function formatProfile(s: ProfileSummary): string {
  const lines = [
    `CPU profile ${s.file}: ${(s.busyMs / 1000).toFixed(1)} s busy of ${(s.totalMs / 1000).toFixed(1)} s sampled`,
    '  self time by package:',
    ...s.byPackage.map(
      (p) =>
        `    ${p.pctOfBusy.toFixed(1).padStart(5)}%  ${String(p.selfMs).padStart(6)} ms  ${p.pkg}`,
    ),
    '  top functions by self time:',
    ...s.topFunctions.map(
      (f) =>
        `    ${f.pctOfBusy.toFixed(1).padStart(5)}%  ${String(f.selfMs).padStart(6)} ms  ${f.name}  ${f.where}`,
    ),
  ];
  return lines.join('\n');
}
