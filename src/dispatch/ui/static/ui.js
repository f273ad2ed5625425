// dispatch ui: live updates and log follow, in plain JavaScript (no build step, no library).
// Server fragments are HTML the server escaped; log text is only ever set with textContent.
"use strict";

const POLL_MS = 2000;

function poll(el) {
  const url = el.dataset.live;
  if (!url) return;
  const tick = async () => {
    if (document.hidden) return setTimeout(tick, POLL_MS);
    try {
      const r = await fetch(url, { headers: { "Accept": "text/html" }, credentials: "same-origin" });
      if (r.ok) {
        const html = await r.text();
        if (html !== el.dataset.last) {
          el.dataset.last = html;
          el.innerHTML = html;
          bindRanks();
          openLatest();
        }
        // a job page stops polling once its fragment no longer asks for it (the job ended)
        if (el.id === "live" && !html.includes('class="pulse"')) return;
      }
    } catch (e) { /* the server may be restarting: keep trying */ }
    setTimeout(tick, POLL_MS);
  };
  setTimeout(tick, POLL_MS);
}

let follow = null;

function showOutput(link) {
  const box = document.getElementById("output");
  const log = document.getElementById("log");
  const title = document.getElementById("output-title");
  const hint = document.getElementById("output-hint");
  if (!box || !log) return;
  document.querySelectorAll("a.rank.active").forEach(a => a.classList.remove("active"));
  link.classList.add("active");
  if (follow) follow.stop = true;
  // offset null: the first ask, answered with the end of the output (its last 256 KiB)
  const state = { stop: false, offset: null, label: link.dataset.label };
  follow = state;
  log.textContent = "";
  title.textContent = link.dataset.label;
  if (hint) hint.hidden = true;
  const params = new URLSearchParams({ submission: link.dataset.submission, execution: link.dataset.execution });
  // a cluster that keeps one file per execution (Slurm) has links without a rank
  if (link.dataset.rank) params.set("rank", link.dataset.rank);
  const step = async () => {
    if (state.stop) return;
    if (state.offset !== null) params.set("offset", String(state.offset));
    let again = false;
    let wait = 1000;
    try {
      const r = await fetch(`/jobs/${encodeURIComponent(box.dataset.job)}/output?${params}`, { credentials: "same-origin" });
      const data = await r.json();
      if (r.status === 429) {  // the dashboard's reads this second are taken: ask again later
        wait = 1000 * Number(r.headers.get("Retry-After") || 2);
        setTimeout(step, wait);
        return;
      }
      if (!r.ok) { log.textContent = data.error || `error ${r.status}`; return; }
      if (data.skipped) log.textContent = `… ${data.skipped} earlier bytes not shown …\n`;
      if (data.text) {
        const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
        log.append(document.createTextNode(data.text));
        if (atEnd) log.scrollTop = log.scrollHeight;
      }
      state.offset = data.offset;
      again = data.running || data.text.length > 0;
      log.dataset.following = data.running ? "yes" : "no";
    } catch (e) { again = true; }
    if (again) setTimeout(step, wait);
  };
  step();
}

// Until the user picks one, show the output of rank 0 of the latest execution (once there is one).
function openLatest() {
  if (follow) return;
  const zeros = [...document.querySelectorAll('a.rank[data-rank="0"], a.rank[data-rank=""]')];
  if (zeros.length) showOutput(zeros[zeros.length - 1]);
}

function bindRanks() {
  document.querySelectorAll("a.rank").forEach(a => {
    if (follow && follow.label === a.dataset.label) a.classList.add("active");
    if (a.dataset.bound) return;
    a.dataset.bound = "1";
    a.addEventListener("click", ev => { ev.preventDefault(); showOutput(a); });
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-live]").forEach(poll);
  bindRanks();
  openLatest();
});
