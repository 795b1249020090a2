import { html, type Html } from './html.ts';

export type NavKey =
  | 'dashboard'
  | 'deliveries'
  | 'clients'
  | 'suppressions'
  | 'dead-letters'
  | 'alerts'
  | 'audit'
  | null;

export interface PageContext {
  /** The signed-in staff member's email (or subject when the provider gave no email). */
  who: string;
  csrf: string;
  flash?: string | null;
  nav: NavKey;
}

const NAV: { key: Exclude<NavKey, null>; href: string; label: string }[] = [
  { key: 'dashboard', href: '/ops/', label: 'Dashboard' },
  { key: 'deliveries', href: '/ops/deliveries', label: 'Deliveries' },
  { key: 'clients', href: '/ops/clients', label: 'Clients' },
  { key: 'suppressions', href: '/ops/suppressions', label: 'Suppressions' },
  { key: 'dead-letters', href: '/ops/dead-letters', label: 'Dead letters' },
  { key: 'alerts', href: '/ops/alerts', label: 'Alerts' },
  { key: 'audit', href: '/ops/audit', label: 'Audit log' },
];

function documentShell(title: string, body: Html): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · ENS console</title>
<link rel="stylesheet" href="/ops/assets/console.css">
<script src="/ops/assets/console.js" defer></script>
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
${body}
</body>
</html>
`;
}

export function csrfField(token: string): Html {
  return html`<input type="hidden" name="_csrf" value="${token}">`;
}

function signOutForm(csrf: string): Html {
  return html`<form method="post" action="/ops/logout" class="sign-out">${csrfField(csrf)}<button type="submit" class="button secondary">Sign out</button></form>`;
}

function header(who: string, csrf: string): Html {
  return html`<header class="top">
  <a class="brand" href="/ops/">ENS <span>console</span></a>
  <div class="account">Signed in as <span id="whoami">${who}</span> ${signOutForm(csrf)}</div>
</header>`;
}

export function flashMessage(flash: string | null | undefined): Html {
  return flash ? html`<p id="flash" role="status">${flash}</p>` : html``;
}

/** A console page: header with who is signed in, the navigation, and main with one h1. */
export function consolePage(ctx: PageContext, title: string, content: Html): Html {
  return documentShell(
    title,
    html`${header(ctx.who, ctx.csrf)}
<div class="frame">
<nav aria-label="Console"><ul>
${NAV.map((n) => html`<li><a href="${n.href}"${n.key === ctx.nav ? html` aria-current="page"` : ''}>${n.label}</a></li>`)}
</ul></nav>
<main id="main" tabindex="-1">
${flashMessage(ctx.flash)}
${content}
</main>
</div>`,
  );
}

/** The page a signed-in person without superuser rights gets, for every console URL. */
export function noticePage(who: string, contact: string, csrf: string): Html {
  return documentShell(
    'No access',
    html`${header(who, csrf)}
<main id="main" tabindex="-1" class="narrow">
<h1>You don't have access to the ENS console</h1>
<p>You are signed in as <strong>${who}</strong>, but the console is for ENS superusers only.</p>
<p id="contact">To get access, ask ${contact}.</p>
<p>They can grant it with <code>ens staff grant ${who}</code>, or by adding you to the superuser group.</p>
</main>`,
  );
}

/** Pages shown outside a session: signed out, sign-in problems, console not configured. */
export function plainPage(title: string, content: Html): Html {
  return documentShell(
    title,
    html`<header class="top"><span class="brand">ENS <span>console</span></span></header>
<main id="main" tabindex="-1" class="narrow">
${content}
</main>`,
  );
}
