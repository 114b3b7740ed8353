/**
 * Asks in the page's confirm dialog (#confirm-dialog, its #confirm-title, #confirm-text and
 * #confirm-button with value "confirm"); resolves true when confirmed.
 */
export function confirmed({ title, text, button }) {
  const dialog = document.getElementById('confirm-dialog');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-button').textContent = button;
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue === 'confirm'), { once: true }));
}
