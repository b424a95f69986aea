// tierdesk console: the only script. Shows how long the reviewer's lease has left.
(function () {
  "use strict";
  var node = document.querySelector("time.lease-expiry");
  var out = document.querySelector(".countdown");
  if (!node || !out) { return; }
  var expires = Date.parse(node.getAttribute("datetime"));
  if (isNaN(expires)) { return; }
  function tick() {
    var left = Math.round((expires - Date.now()) / 1000);
    out.textContent = left > 0
      ? "(" + Math.floor(left / 60) + " min " + (left % 60) + " s left)"
      : "(lease expired: reload to renew, another reviewer may take it)";
    if (left > 0) { window.setTimeout(tick, 1000); }
  }
  tick();
})();
