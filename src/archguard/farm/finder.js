// The farm page's finder (archguard.farm.finder): judges site.json's wheels in the browser.
const SITE = JSON.parse(document.getElementById('site-data').textContent);
const $ = (id) => document.getElementById(id);
function fill(id, values) {
  const want = new URLSearchParams(location.search).get(id);
  $(id).innerHTML = values.map((v) => `<option${v === want ? ' selected' : ''}>${v}</option>`).join('');
}
const cmp = (a, b) => { const x = a.split('.').map(Number), y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) { const d = (x[i] || 0) - (y[i] || 0); if (d) return d; }
  return 0; };
function pinHolds(pin, torch) {
  if (!pin) return true;
  return pin.replace(/^torch/, '').split(',').every((c) => {
    const m = c.trim().match(/^(>=|<=|===|==|<|>|!=|~=)?\s*([0-9]+(?:\.[0-9]+)*)(\.\*)?/); if (!m) return true;
    const op = m[1] || '==', v = m[2];
    if (m[3]) {  // ==2.13.* / !=2.13.*: a prefix match
      const head = torch.split('.').slice(0, v.split('.').length).join('.');
      return op === '!=' ? cmp(head, v) !== 0 : cmp(head, v) === 0;
    }
    const d = cmp(torch, v);
    if (op === '~=') {  // ~=2.13.0: >=2.13.0 and ==2.13.*
      const head = v.split('.').slice(0, -1).join('.');
      return d >= 0 && cmp(torch.split('.').slice(0, head.split('.').length).join('.'), head) === 0;
    }
    return {'>=': d >= 0, '<=': d <= 0, '==': d === 0, '===': d === 0, '<': d < 0, '>': d > 0,
            '!=': d !== 0}[op];
  });
}
function pythonHolds(name, python) {
  const parts = name.replace(/\.whl$/, '').split('-'); const py = parts[parts.length - 3], abi = parts[parts.length - 2];
  const free = python.endsWith('t'), version = python.replace(/t$/, '');  // 3.14t: free-threaded
  const mine = 'cp' + version.replace('.', '');
  // abi3 (the stable ABI) never loads in a free-threaded Python
  if (abi === 'abi3') return !free && /^cp\d+$/.test(py) && cmp(version, py.slice(2, 3) + '.' + py.slice(3)) >= 0;
  return py.split('.').includes(mine) && abi.endsWith('t') === free;
}
// the machine a wheel's platform tag names (manylinux_2_28_aarch64 -> aarch64)
const platformOf = (w) => w.platform || (w.name.match(/_(x86_64|aarch64)\.whl$/) || [])[1] || null;
function native(targets, gpu) {
  const [maj, min] = gpu.split('.').map(Number);
  return targets.some((t) => { const m = t.match(/^sm_(\d+?)(\d)([af]?)$/); if (!m) return false;
    const tm = Number(m[1]), tn = Number(m[2]);
    return m[3] === 'a' ? (tm === maj && tn === min) : (tm === maj && tn <= min); });
}
function why(w, c) {
  const out = [];
  if (!pinHolds(w.pin, c.torch)) out.push(`no wheel for torch ${c.torch}: it requires ${w.pin}`);
  if (w.cuda.split('.')[0] !== c.cuda.split('.')[0]) out.push(`compiled with CUDA ${w.cuda}, not ${c.cuda}`);
  if (!pythonHolds(w.name, c.python)) out.push(`not for Python ${c.python}`);
  const machine = platformOf(w);
  if (machine && machine !== c.platform) out.push(`built for ${machine}, not ${c.platform}`);
  if (!native(w.targets, c.gpu)) out.push(`no native image for ${c.gpu} (it holds ${w.targets.join(' ')})`);
  return out;
}
function show() {
  const c = {torch: $('torch').value, cuda: $('cuda').value, python: $('python').value,
    platform: $('platform').value, gpu: $('gpu').value};
  const lines = [];
  for (const pkg of [...new Set(SITE.wheels.map((w) => w.package))].sort()) {
    const judged = SITE.wheels.filter((w) => w.package === pkg)
      .map((w) => [w, why(w, c)]);
    const stable = (w) => (!w.pin || !w.pin.includes('<') ? 1 : 0);
    const public_ = (w) => w.name.split('-')[1].split('+')[0];
    // as `archguard which`: the newest version, then a stable-ABI wheel
    const fit = judged.filter(([, r]) => !r.length).map(([w]) => w)
      .sort((a, b) => cmp(public_(b), public_(a)) || stable(b) - stable(a));
    if (fit.length) {
      const w = fit[0], tag = 'cu' + w.cuda.replace('.', '');
      const index = new URL(SITE.lines[tag] || '', location.href).href;
      const version = w.name.split('-')[1];
      lines.push(`${pkg}: pip install --extra-index-url=${index} ${pkg}==${version}`);
    } else if (!judged.some(([w]) => !platformOf(w) || platformOf(w) === c.platform)) {
      lines.push(`${pkg}: none for ${c.platform}`);
    } else {
      lines.push(`${pkg}: no wheel fits`);
      for (const [w, r] of judged) lines.push(`  not ${w.name}: ${r.join('; ')}`);
    }
  }
  $('finder-out').textContent = lines.join('\n');
}
// each cell's torch as a version: ==X.Y.Z, else the lowest bound of its range
const torchOf = (req) => ((req.match(/(?:===|==|>=|~=)\s*([0-9][0-9.]*)/) || [])[1] || req);
fill('torch', [...new Set(SITE.cells.map((c) => torchOf(c.torch)))]);
fill('cuda', [...new Set(SITE.cells.map((c) => c.cuda))]);
fill('python', [...new Set(SITE.cells.map((c) => c.python))]);
fill('platform', [...new Set(SITE.cells.map((c) => c.platform || 'x86_64'))]);
fill('gpu', GPUS);
for (const id of ['torch', 'cuda', 'python', 'platform', 'gpu']) $(id).addEventListener('change', show);
show();
