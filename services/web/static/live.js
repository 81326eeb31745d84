// A page fed by the floor's live stream says when the web is out of reach; the stream reconnects by itself
// (htmx's SSE extension) and the web sends every tile again as it does.
document.addEventListener("htmx:sseError", function () {
  var c = document.getElementById("connection"); if (c) { c.hidden = false; }
});
document.addEventListener("htmx:sseOpen", function () {
  var c = document.getElementById("connection"); if (c) { c.hidden = true; }
});
