// A page fed by the floor's live stream says when the web is out of reach; the stream reconnects by itself
// (htmx's SSE extension) and the web sends every tile again as it does.
document.addEventListener("htmx:sseError", function () {
  var c = document.getElementById("connection"); if (c) { c.hidden = false; }
});
document.addEventListener("htmx:sseOpen", function () {
  var c = document.getElementById("connection"); if (c) { c.hidden = true; }
});

// Focus stays where it was across every live redraw and every step: the element focused last is found again
// by its id once a swap has replaced it (every link and button a redraw replaces has one).
var focusedId = null;
document.addEventListener("focusin", function (e) { if (e.target.id) { focusedId = e.target.id; } });
function keepFocus() {
  var active = document.activeElement;
  if (focusedId && (!active || active === document.body)) {
    var again = document.getElementById(focusedId);
    if (again) { again.focus({preventScroll: true}); }
    else if (document.querySelector(".stepper")) { document.getElementById("step-now").focus({preventScroll: true}); }
  }
}
document.addEventListener("htmx:afterSwap", keepFocus);
document.addEventListener("htmx:oobAfterSwap", keepFocus);
document.addEventListener("htmx:afterSettle", keepFocus);  // and once settled, where the swap's own steps moved it

// A new alert on a tile is said aloud once, through the page's live region.
var said = null;
function announce() {
  var region = document.getElementById("announcer");
  if (!region) { return; }
  var now = new Set(Array.from(document.querySelectorAll(".tile .alert .said"), function (a) {
    return a.closest(".tile").dataset.table + ": " + a.textContent;
  }));
  if (said !== null) {
    var fresh = Array.from(now).filter(function (text) { return !said.has(text); });
    if (fresh.length) { region.textContent = fresh.join(". "); }
  }
  said = now;
}
document.addEventListener("htmx:oobAfterSwap", announce);
document.addEventListener("DOMContentLoaded", announce);

// A coup is stepped with the arrow keys, Home and End, wherever the focus is but in a field.
document.addEventListener("keydown", function (e) {
  if (e.altKey || e.ctrlKey || e.metaKey || e.target.closest("input, select, textarea")) { return; }
  var link = document.getElementById({ArrowLeft: "step-prev", ArrowRight: "step-next", Home: "step-first", End: "step-last"}[e.key]);
  if (link) { e.preventDefault(); focusedId = link.id; link.click(); }
});

// The floor's clock, in UTC as every time the pages show.
function tick() {
  var clock = document.getElementById("clock");
  if (clock) { clock.textContent = new Date().toISOString().slice(11, 19) + " UTC"; }
}
document.addEventListener("DOMContentLoaded", tick);
setInterval(tick, 1000);
