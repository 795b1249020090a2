// The console tests need a Chromium: Debian's (`apt-get install -y chromium`, the README's
// prerequisite), or any other named by CHROMIUM_PATH. playwright-core drives it; no browser is
// downloaded (`npx playwright install` cannot run here).

import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { Teardown } from './service.ts';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

/** The browser to drive, or an error that says how to get one. */
function chromiumPath(): string {
  const given = process.env.CHROMIUM_PATH;
  if (given) return given;
  const found = CANDIDATES.find((p) => existsSync(p));
  if (found) return found;
  throw new Error(`the console tests drive a headless Chromium and found none (${CANDIDATES.join(', ')}): apt-get install -y chromium, or set CHROMIUM_PATH`);
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
export const SCREENSHOT_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'test-artifacts', 'console');

/** One Chromium per test file, closed at teardown. */
export async function launchBrowser(t: Teardown): Promise<Browser> {
  const browser = await chromium.launch({ executablePath: chromiumPath(), args: ARGS });
  t.teardown(() => browser.close());
  return browser;
}

/**
 * A fresh context (its own cookies, storage and IdP session) and a page in it, closed at teardown.
 * `origin` gets clipboard permissions, so a test can read what a Copy button copied.
 */
export async function openPage(t: Teardown, browser: Browser, opts: { origin?: string } = {}): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  t.teardown(() => context.close());
  // Fail in seconds, not Playwright's default 30 s, when the console lacks an element.
  context.setDefaultTimeout(10_000);
  if (opts.origin) await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: opts.origin });
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
