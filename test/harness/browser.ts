// The console tests need a Chromium. In order: the one CHROMIUM_PATH names, the system's
// (/usr/bin/chromium…), else the build that the @sparticuz/chromium dev dependency ships inside its
// npm package, so `npm ci` alone brings a browser on Linux x64. ENS_TEST_BROWSER=system or =npm
// forces one of the two (npm is how the packaged one is checked on a machine that has both).
// playwright-core drives it; nothing is downloaded (`npx playwright install` cannot run here).

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { Teardown } from './service.ts';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];
const MODES = ['auto', 'system', 'npm'] as const;

/** A browser binary and what it needs in its environment to start. */
interface BrowserBinary {
  executablePath: string;
  env?: Record<string, string>;
}

let packaged: Promise<BrowserBinary> | undefined;

/**
 * The Chromium of @sparticuz/chromium, unpacked once per machine and version into
 * <tmpdir>/ens-test-chromium-<version>. The package unpacks into os.tmpdir() itself and treats a
 * file already there as done, so two test files unpacking at once could launch a half-written
 * binary: each unpacks in a child process whose TMPDIR is a fresh directory, then renames that
 * into place, and the loser of the race throws its copy away.
 */
function packagedChromium(): Promise<BrowserBinary> {
  packaged ??= (async () => {
    if (platform() !== 'linux' || arch() !== 'x64')
      throw new Error(
        `@sparticuz/chromium ships a build for Linux x64 only, not ${platform()} ${arch()}`,
      );
    const entry = import.meta.resolve('@sparticuz/chromium');
    const pkgRoot = join(dirname(fileURLToPath(entry)), '..', '..');
    const { version } = JSON.parse(await readFile(join(pkgRoot, 'package.json'), 'utf8')) as {
      version: string;
    };
    const dir = join(tmpdir(), `ens-test-chromium-${version}`);
    // The binary links NSS and expat, which a fresh Debian lacks; the package carries them in its
    // Amazon Linux layer, which it unpacks only when it believes it runs on Lambda, hence the
    // AWS_EXECUTION_ENV below. The browser then finds them through LD_LIBRARY_PATH.
    const binary: BrowserBinary = {
      executablePath: join(dir, 'chromium'),
      env: {
        LD_LIBRARY_PATH: join(dir, 'al2023', 'lib'),
        FONTCONFIG_FILE: join(dir, 'fonts.conf'),
      },
    };
    if (existsSync(join(dir, 'fonts.conf'))) return binary;
    const staging = await mkdtemp(`${dir}-unpacking-`);
    try {
      const script = `const { default: c } = await import(${JSON.stringify(entry)}); process.stdout.write(await c.executablePath());`;
      await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
        env: { ...process.env, TMPDIR: staging, AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs20.x' },
        timeout: 120_000,
      });
      if (!existsSync(join(staging, 'al2023', 'lib', 'libnss3.so')))
        throw new Error(
          `@sparticuz/chromium ${version} did not unpack its libraries (al2023/lib) into ${staging}`,
        );
      // The package's own fonts.conf looks for its fonts in /tmp/fonts; without fonts no text is
      // drawn.
      await writeFile(
        join(staging, 'fonts.conf'),
        `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig><dir>${join(dir, 'fonts')}</dir><cachedir>${join(dir, 'fonts-cache')}</cachedir></fontconfig>\n`,
      );
      await rename(staging, dir).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'EEXIST' && e.code !== 'ENOTEMPTY') throw e;
      });
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
    return binary;
  })();
  return packaged;
}

/** The browser to drive, or an error that says what was tried and how to get one. */
async function findBrowser(): Promise<BrowserBinary> {
  const mode = process.env.ENS_TEST_BROWSER || 'auto';
  if (!(MODES as readonly string[]).includes(mode))
    throw new Error(`ENS_TEST_BROWSER=${mode}: must be one of ${MODES.join(', ')}`);
  const tried: string[] = [];
  if (mode !== 'npm') {
    const given = process.env.CHROMIUM_PATH;
    if (given) return { executablePath: given };
    const found = CANDIDATES.find((p) => existsSync(p));
    if (found) return { executablePath: found };
    tried.push(`CHROMIUM_PATH (unset)`, ...CANDIDATES.map((p) => `${p} (absent)`));
  }
  if (mode !== 'system') {
    try {
      return await packagedChromium();
    } catch (e) {
      tried.push(`the @sparticuz/chromium dev dependency (${(e as Error).message})`);
    }
  }
  throw new Error(
    `the console tests drive a headless Chromium and found none (ENS_TEST_BROWSER=${mode}); tried: ${tried.join('; ')}. ` +
      ('Run npm ci (it installs @sparticuz/chromium, Linux x64), or apt-get install -y ' +
        'chromium, or set CHROMIUM_PATH'),
  );
}

// Without the background-networking flags Chromium keeps dialling Google's hosts, which this
// machine's closed network refuses; --no-sandbox because the tests run as root.
const ARGS = [
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Where screenshots go: test-artifacts/console/ at the repository root (gitignored). */
export const SCREENSHOT_DIR = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'test-artifacts',
  'console',
);

/** One Chromium per test file, closed at teardown. */
export async function launchBrowser(t: Teardown): Promise<Browser> {
  const { executablePath, env } = await findBrowser();
  const browser = await chromium.launch({
    executablePath,
    args: ARGS,
    ...(env ? { env: { ...process.env, ...env } } : {}),
  });
  t.teardown(() => browser.close());
  return browser;
}

/**
 * A fresh context (its own cookies, storage and IdP session) and a page in it, closed at teardown.
 * `origin` gets clipboard permissions, so a test can read what a Copy button copied.
 */
export async function openPage(
  t: Teardown,
  browser: Browser,
  opts: { origin?: string } = {},
): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  t.teardown(() => context.close());
  // Fail in seconds, not Playwright's default 30 s, when the console lacks an element.
  context.setDefaultTimeout(10_000);
  if (opts.origin)
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: opts.origin });
  const page = await context.newPage();
  // A confirm() before a destructive action is accepted, as the staff member would.
  page.on('dialog', (d) => void d.accept());
  return { context, page };
}

/** Saves a full-page PNG to test-artifacts/console/<name>.png and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  await mkdir(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}
