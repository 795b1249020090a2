import { freePort } from '@ens/local-engines';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { launchBrowser, openPage } from '../harness/browser.ts';
import { startTestIdp, type TestIdp } from '../harness/oidc-provider.ts';
import { startTestService, type Teardown, type TestService } from '../harness/service.ts';

/** Whom the notice page tells a signed-in user without rights to ask. */
export const CONTACT = 'the platform team in #ens-help';
/**
 * ada@example.com is a superuser through this IdP group; carol@example.com through the allow-list.
 */
export const SUPERUSER_GROUP = 'ens-superusers';
export const ALLOW_LISTED = 'carol@example.com';

export interface Console {
  svc: TestService;
  idp: TestIdp;
  browser: Browser;
  /** ENS's base URL (also ENS_PUBLIC_URL). */
  ensUrl: string;
  /**
   * A fresh browser context signed in as `email`, by visiting `path` and passing the IdP's login.
   */
  signedIn(
    t: Teardown,
    email: string,
    path?: string,
  ): Promise<{ context: BrowserContext; page: Page }>;
}

/**
 * One ENS (all roles), one OpenID Provider and one Chromium for a test file. The port is chosen
 * first because the IdP must know the console's redirect URI and ENS must know the issuer.
 */
export async function startConsole(
  t: Teardown,
  env: Record<string, string> = {},
): Promise<Console> {
  const port = await freePort();
  const ensUrl = `http://127.0.0.1:${port}`;
  const idp = await startTestIdp(t, { ensPublicUrl: ensUrl });
  const [svc, browser] = await Promise.all([
    startTestService(t, {
      env: {
        PORT: String(port),
        ENS_PUBLIC_URL: ensUrl,
        ...idp.env,
        ENS_OPS_SUPERUSER_GROUP: SUPERUSER_GROUP,
        ENS_OPS_SUPERUSERS: ALLOW_LISTED,
        ENS_OPS_CONTACT: CONTACT,
        ...env,
      },
    }),
    launchBrowser(t),
  ]);
  return {
    svc,
    idp,
    browser,
    ensUrl,
    async signedIn(t, email, path = '/ops/') {
      const opened = await openPage(t, browser, { origin: ensUrl });
      await opened.page.goto(ensUrl + path);
      await idp.signIn(opened.page, email);
      return opened;
    },
  };
}

/** The trimmed text of the only element `locator` matches. */
export async function textOf(locator: Locator): Promise<string> {
  return ((await locator.textContent({ timeout: 5_000 })) ?? '').replace(/\s+/g, ' ').trim();
}

/** The visible text of the whole page, whitespace collapsed. */
export async function pageText(page: Page): Promise<string> {
  return textOf(page.locator('body'));
}

/** The `_csrf` value of the first form on the page that has one. */
export async function csrfToken(page: Page): Promise<string | null> {
  const input = page.locator('input[type="hidden"][name="_csrf"]').first();
  return (await input.count()) > 0 ? input.getAttribute('value') : null;
}

/** The page's `<h1>`, after checking there is exactly one. */
export async function heading(page: Page): Promise<{ count: number; text: string }> {
  const h1 = page.locator('h1');
  const count = await h1.count();
  return { count, text: count > 0 ? await textOf(h1.first()) : '' };
}

/** Clicks something that submits a form and waits for the page that the submission lands on. */
export async function submitAndWait(page: Page, target: Locator): Promise<void> {
  await Promise.all([
    page.waitForEvent('framenavigated', { predicate: (f) => f === page.mainFrame() }),
    target.click(),
  ]);
  await page.waitForLoadState('load');
}
