// tierdesk console script: the lease countdown, live updates (server-sent events, polling when
// the stream cannot connect), reviewer notifications (browser, sound), typing, canned replies.
// Text from customers is only ever set with textContent.
(function () {
  "use strict";

  // -- lease countdown ---------------------------------------------------------------------------
  var leaseNode = document.querySelector("time.lease-expiry");
  var leaseOut = document.querySelector(".countdown");
  if (leaseNode && leaseOut) {
    var expires = Date.parse(leaseNode.getAttribute("datetime"));
    var reclaim = document.querySelector("form.reclaim");
    var tick = function () {
      var left = Math.round((expires - Date.now()) / 1000);
      if (left > 0) {
        leaseOut.textContent = "(" + Math.floor(left / 60) + " min " + (left % 60) + " s left)";
        window.setTimeout(tick, 1000);
        return;
      }
      // An expired claim is free: the next "Claim next" of any reviewer may take it, and the
      // reconciler puts it back in the queue. Reloading does not renew it then.
      leaseOut.textContent = "(lease expired: the item went back to the queue, where another " +
        "reviewer may take it; claim it again to go on)";
      if (reclaim) { reclaim.hidden = false; }
    };
    if (!isNaN(expires)) { tick(); }
  }

  var body = document.body;
  var liveUrl = body.getAttribute("data-console-live");
  if (!liveUrl) { return; } // the login page
  var csrf = body.getAttribute("data-csrf") || "";
  var queueJson = body.getAttribute("data-queue-json");
  var POLL_MS = 5000;
  var CHECK_MS = 30000;
  var WARN_BEFORE_S = 60;

  function pref(key, value) {
    try {
      if (value === undefined) { return window.localStorage.getItem("tierdesk:console:" + key); }
      window.localStorage.setItem("tierdesk:console:" + key, value);
    } catch (err) { /* storage blocked: preferences last for this page only */ }
    return null;
  }

  // -- notifications ------------------------------------------------------------------------------
  var toasts = document.getElementById("console-toasts");
  var notifyToggle = document.getElementById("notify-toggle");
  var soundToggle = document.getElementById("sound-toggle");
  var liveState = document.getElementById("live-state");
  var canNotify = "Notification" in window;
  var notifyOn = canNotify && pref("notify") === "1" && window.Notification.permission === "granted";

  function showNotifyState() {
    notifyToggle.textContent = "Notifications: " + (notifyOn ? "on" : "off");
    notifyToggle.setAttribute("aria-pressed", notifyOn ? "true" : "false");
  }
  notifyToggle.addEventListener("click", function () {
    if (notifyOn) {
      notifyOn = false;
      pref("notify", "0");
      showNotifyState();
      return;
    }
    if (!canNotify) {
      toast("This browser cannot show notifications; the console still shows them here.");
      return;
    }
    window.Notification.requestPermission().then(function (permission) {
      notifyOn = permission === "granted";
      pref("notify", notifyOn ? "1" : "0");
      showNotifyState();
    });
  });
  showNotifyState();
  soundToggle.checked = pref("sound") === "1";
  soundToggle.addEventListener("change", function () {
    pref("sound", soundToggle.checked ? "1" : "0");
  });

  function beep() {
    if (!soundToggle.checked) { return; }
    try {
      var Ctx = window.AudioContext || window.webkitAudioContext;
      var ctx = new Ctx();
      var osc = ctx.createOscillator();
      var gain = ctx.createGain();
      osc.frequency.value = 880;
      gain.gain.value = 0.08;
      osc.connect(gain);
      gain.connect(ctx.destination);
      osc.start();
      osc.stop(ctx.currentTime + 0.18);
    } catch (err) { /* no audio device */ }
  }

  function toast(text) {
    var item = document.createElement("li");
    item.textContent = text;
    toasts.appendChild(item);
    window.setTimeout(function () { item.remove(); }, 10000);
  }

  function alertReviewer(title, text, link) {
    toast(title + ": " + text);
    beep();
    if (notifyOn) {
      try {
        var note = new window.Notification(title, { body: text, tag: link || title });
        note.onclick = function () {
          window.focus();
          if (link) { window.location.href = link; }
        };
      } catch (err) { /* some browsers allow notifications from service workers only */ }
    }
  }

  // -- the item page: the conversation, live ----------------------------------------------------
  var convo = document.getElementById("conversation");
  var stateNode = document.getElementById("handoff-state");
  var syncing = false;
  var syncAgain = false; // an event came while a read was in flight: read again after it
  var ROLE = { customer: "Customer", bot: "Bot", agent: "Agent" };

  function appendMessage(message) {
    var li = document.createElement("li");
    li.className = "msg " + message.role + " live";
    var role = document.createElement("span");
    role.className = "role";
    role.textContent = (ROLE[message.role] || message.role) +
      (message.role === "bot" && message.status === "pending_review" ? " (draft, held back)" : "");
    var when = document.createElement("span");
    when.className = "when";
    when.textContent = message.created_at || "";
    var text = document.createElement("div");
    text.className = "text";
    text.textContent = message.text || "(no text)";
    li.appendChild(role);
    li.appendChild(when);
    li.appendChild(text);
    convo.appendChild(li);
    convo.setAttribute("data-last-seq", String(message.seq));
  }

  function syncMessages() {
    if (!convo) { return; }
    // One read at a time (each asks for what follows the last message shown), but never drop
    // one: the read in flight may have been answered before the message its event announces.
    if (syncing) { syncAgain = true; return; }
    syncing = true;
    syncAgain = false;
    var url = convo.getAttribute("data-messages") + "?after=" +
      encodeURIComponent(convo.getAttribute("data-last-seq"));
    fetch(url, { credentials: "same-origin" }).then(function (r) { return r.json(); })
      .then(function (data) {
        data.messages.forEach(appendMessage);
        if (stateNode && data.state) {
          stateNode.textContent = data.state.replace("_", " ");
          stateNode.className = "state " + data.state;
        }
      })
      .catch(function () { /* the next event or poll tries again */ })
      .then(function () {
        syncing = false;
        if (syncAgain) { syncMessages(); }
      });
  }

  // -- the queue page ---------------------------------------------------------------------------
  function refreshQueue() {
    if (!document.getElementById("queue-live")) { return; }
    fetch(window.location.href, { credentials: "same-origin" }).then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        ["queue-live"].forEach(function (id) {
          var fresh = doc.getElementById(id);
          var old = document.getElementById(id);
          if (fresh && old) { old.replaceWith(document.importNode(fresh, true)); }
        });
        var depth = doc.getElementById("depth");
        if (depth && document.getElementById("depth")) {
          document.getElementById("depth").textContent = depth.textContent;
        }
      })
      .catch(function () { /* try again on the next event */ });
  }

  // -- new questions and first-response warnings (also the polling fallback) ---------------------
  var seen = null;
  var warned = {};

  function checkQueue() {
    if (!queueJson) { return; }
    fetch(queueJson, { credentials: "same-origin" }).then(function (r) { return r.json(); })
      .then(function (data) {
        var first = seen === null;
        seen = seen || {};
        var target = data.first_response_target_s;
        data.items.forEach(function (item) {
          if (!seen[item.id] && !first && item.status === "pending") {
            alertReviewer("New question waiting", "#" + item.id + " (" + item.reason + ")",
              "/console/items/" + item.id);
          }
          seen[item.id] = true;
          if (target > 0 && item.status === "pending" && !warned[item.id] &&
              item.waited_s >= target - WARN_BEFORE_S) {
            warned[item.id] = true;
            alertReviewer("First-response target", "#" + item.id + " has waited " +
              Math.round(item.waited_s / 60) + " min (target " + Math.round(target / 60) + " min)",
              "/console/items/" + item.id);
          }
        });
      })
      .catch(function () { /* offline for a moment */ });
  }

  function onEvent(event) {
    if (event.type === "escalated") {
      if (seen && !seen[event.item_id]) {
        seen[event.item_id] = true;
        alertReviewer("New question waiting", "#" + event.item_id + " (" + event.reason + ")",
          "/console/items/" + event.item_id);
      }
      refreshQueue();
    } else if (event.type === "queue") {
      refreshQueue();
    }
    if (convo && (event.type === "hello" || event.type === "resync" ||
        event.conversation_id === convo.getAttribute("data-conversation"))) {
      syncMessages();
    }
    if (event.type === "resync") { refreshQueue(); checkQueue(); }
  }

  var pollTimer = null;
  function startPolling() {
    liveState.textContent = "polling";
    liveState.className = "live-state";
    if (pollTimer) { return; }
    pollTimer = window.setInterval(function () {
      syncMessages();
      refreshQueue();
      checkQueue();
    }, POLL_MS);
  }

  function connect() {
    if (!window.EventSource) { startPolling(); return; }
    var source = new window.EventSource(liveUrl);
    source.onopen = function () {
      liveState.textContent = "live";
      liveState.className = "live-state on";
      if (pollTimer) { window.clearInterval(pollTimer); pollTimer = null; }
    };
    source.onmessage = function (message) {
      try { onEvent(JSON.parse(message.data)); } catch (err) { /* not ours */ }
    };
    source.onerror = function () {
      // The browser reconnects by itself; a refused stream (503) is closed for good: poll.
      if (source.readyState === window.EventSource.CLOSED) { startPolling(); }
      else { liveState.textContent = "reconnecting"; liveState.className = "live-state"; }
    };
  }

  checkQueue();
  window.setInterval(checkQueue, CHECK_MS);
  connect();

  // -- replying: typing indicator, canned replies -------------------------------------------------
  var replyForm = document.querySelector("form.reply");
  var replyText = document.getElementById("reply-text");
  if (replyForm && replyText) {
    var lastTyping = 0;
    replyText.addEventListener("input", function () {
      var now = Date.now();
      if (now - lastTyping < 2500) { return; }
      lastTyping = now;
      fetch(replyForm.getAttribute("data-typing"), {
        method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": csrf }
      }).catch(function () { /* cosmetic */ });
    });
    var canned = document.getElementById("canned-select");
    if (canned) {
      canned.addEventListener("change", function () {
        var option = canned.options[canned.selectedIndex];
        var insert = option && option.getAttribute("data-body");
        if (insert) {
          var start = replyText.selectionStart || 0;
          var end = replyText.selectionEnd || 0;
          replyText.value = replyText.value.slice(0, start) + insert + replyText.value.slice(end);
          replyText.focus();
        }
        canned.selectedIndex = 0;
      });
    }
    var saveBody = document.getElementById("canned-body");
    if (saveBody) {
      saveBody.form.addEventListener("submit", function () { saveBody.value = replyText.value; });
    }
  }
})();
