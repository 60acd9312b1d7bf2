/** The widget's CSS, scoped by its Shadow DOM (nothing leaks in or out). */
export const STYLES = `
:host{all:initial}
.p{box-sizing:border-box;width:260px;padding:12px;border-radius:10px;background:#fff;color:#1b1f24;border:1px solid #c9d1d9;box-shadow:0 4px 16px rgba(0,0,0,.18);font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
.p[data-state=call]{border-color:#1f883d}
.p[data-state=error],.p[data-state=unauthorized]{border-color:#cf222e}
p{margin:0 0 6px}
.s{font-weight:600}
.n{font-weight:600;font-size:15px}
.t{font-variant-numeric:tabular-nums}
.m{color:#9a3412}
.r{display:flex;flex-wrap:wrap;gap:6px;margin-top:6px}
button,a.l{font:inherit;padding:6px 10px;border-radius:6px;border:1px solid #8c959f;background:#f6f8fa;color:#1b1f24;cursor:pointer;text-decoration:none}
button:where(:not(.g,.d)):hover{background:#eaeef2}
button:focus-visible,a.l:focus-visible{outline:3px solid #0969da;outline-offset:2px}
.g{background:#1f883d;border-color:#1f883d;color:#fff}
.d{background:#cf222e;border-color:#cf222e;color:#fff}
.g:hover{background:#1a7f37;border-color:#1a7f37}
.d:hover{background:#a40e26;border-color:#a40e26}
button[aria-pressed=true]{background:#ddf4ff;border-color:#0969da}
.k{display:grid;grid-template-columns:repeat(3,1fr);gap:4px;margin-top:6px}
[hidden]{display:none!important}
.sr{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
`;
