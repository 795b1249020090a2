// ENS console: copy buttons for secrets shown once. Nothing else on the console needs script.
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
    ok = document.execCommand && document.execCommand('copy');
  }
  if (status) {
    status.textContent = '';
    // A fresh text node so screen readers announce it again on a second copy.
    window.setTimeout(() => { status.textContent = ok ? 'Copied' : 'Press Ctrl+C to copy the selected text'; }, 50);
  }
});
