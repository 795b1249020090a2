// ENS console: copy buttons for secrets shown once, and the dashboard's self-refresh. Everything
// else works without script.
document.addEventListener('click', async (event) => {
  const button = event.target instanceof Element ? event.target.closest('button[data-copy]') : null;
  if (!button) return;
  const source = document.getElementById(button.getAttribute('data-copy'));
  const status = document.getElementById('copy-status');
  if (!source) return;
  const text = source.textContent || '';
  let ok = false;
  try {
    await navigator.clipboard.writeText(text);
    ok = true;
  } catch {
    // Clipboard API refused (plain http, permissions): select the text so Ctrl+C works.
    const range = document.createRange();
    range.selectNodeContents(source);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    ok = document.execCommand?.('copy');
  }
  if (status) {
    status.textContent = '';
    // A fresh text node so screen readers announce it again on a second copy.
    window.setTimeout(() => {
      status.textContent = ok ? 'Copied' : 'Press Ctrl+C to copy the selected text';
    }, 50);
  }
});

// The dashboard refreshes itself: every data-refresh seconds it fetches the same page and swaps in
// the parts marked data-live, so scroll position and focus stay where they are. It waits while the
// tab is hidden, can be paused (WCAG 2.2.1), and stops when the session has ended.
(function liveRefresh() {
  const live = document.querySelector('[data-refresh]');
  if (!live) return;
  const seconds = Math.max(2, Number(live.getAttribute('data-refresh')) || 30);
  const toggle = document.getElementById('refresh-toggle');
  let paused = false;
  let stopped = false;
  if (toggle) {
    toggle.hidden = false;
    toggle.addEventListener('click', () => {
      paused = !paused;
      toggle.setAttribute('aria-pressed', String(paused));
      toggle.textContent = paused ? 'Resume refresh' : 'Pause refresh';
    });
  }
  async function refresh() {
    if (stopped || paused || document.hidden) return;
    try {
      const res = await fetch(window.location.href, {
        credentials: 'same-origin',
        headers: { accept: 'text/html' },
      });
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      const parts = doc.querySelectorAll('[data-live][id]');
      if (!res.ok || parts.length === 0) {
        // Signed out, or an error page: keep what is shown and say why it no longer moves.
        stopped = true;
        const note = document.getElementById('generated');
        if (note)
          note.textContent =
            'Automatic refresh stopped: the session has ended or ENS did not answer. Reload the page.';
        return;
      }
      for (const fresh of parts) {
        const old = document.getElementById(fresh.id);
        if (old) old.replaceWith(document.importNode(fresh, true));
      }
    } catch {
      // A network blip: try again at the next tick.
    }
  }
  window.setInterval(refresh, seconds * 1000);
})();
