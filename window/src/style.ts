/**
 * The call window's style sheet: one <style id="c2c-window-style"> the page carries, and that the
 * view adds where it is missing (ui.ts). The page's CSP allows this text by its hash
 * (api/routes/pages/window.ts), not every inline style: a change here changes the hash, which the
 * server works out from this very text.
 */
export const WINDOW_STYLE = `
#c2c-window{font:15px/1.4 system-ui,sans-serif;color:#1b1f24;max-width:420px;margin:0 auto;padding:16px}
#c2c-window header{display:flex;justify-content:space-between;align-items:center;gap:8px}
#c2c-window [data-testid=w-agent]{font-weight:600}
#c2c-window [data-testid=w-connection]{font-size:12px;color:#5b6570}
#c2c-window [data-testid=w-state]{margin:12px 0;padding:8px 10px;border-radius:6px;background:#eef1f4}
#c2c-window [data-state=ready]{background:#e3f5e8}#c2c-window [data-state=call]{background:#e3ecfb}
#c2c-window [data-state=no_mic],#c2c-window [data-state=closed],#c2c-window [data-state=error]{background:#fdecec}
#c2c-window .c2c-call{border:1px solid #d7dde3;border-radius:8px;padding:12px;margin:12px 0}
#c2c-window [data-testid=w-call-name]{font-size:18px;font-weight:600}
#c2c-window [data-testid=w-timer]{font-variant-numeric:tabular-nums;margin-left:8px}
#c2c-window .c2c-actions{display:flex;gap:8px;margin-top:12px}
#c2c-window button{font:inherit;padding:6px 14px;border-radius:6px;border:1px solid #aab4be;background:#fff;cursor:pointer}
#c2c-window button:disabled,#c2c-window button[aria-disabled="true"]{opacity:.5;cursor:default}
#c2c-window [data-testid=w-hangup]{background:#c62828;border-color:#c62828;color:#fff}
#c2c-window [data-testid=w-message][data-tone=error]{color:#b3261e}#c2c-window [data-testid=w-message][data-tone=warn]{color:#8a5300}
#c2c-window .c2c-note{font-size:13px;color:#5b6570}
#c2c-window [data-testid=w-consent-yes]{background:#1f6feb;border-color:#1f6feb;color:#fff}
#c2c-window .c2c-sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
`;
