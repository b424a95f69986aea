/*
 * tierdesk chat widget: no build step, no dependencies.
 *
 * Embed with one tag:
 *   <script src="https://support.example.com/static/widget/widget.js"
 *           data-tierdesk-url="https://support.example.com" data-tierdesk-name="Northwind Bank"
 *           defer></script>
 *
 * Safety: text from customers, reviewers and the API is only ever set with textContent. The one
 * kind of HTML shown, an article's body, is the server's sanitised HTML, and it is rebuilt here
 * element by element from an allow-list (no innerHTML), so even a compromised response cannot
 * run script in the host page.
 *
 * Stable hooks for tests and host pages: #tierdesk-launcher, #tierdesk-panel, #tierdesk-input,
 * .td-msg--customer / --bot / --agent / --notice, .td-pending, .td-feedback button[data-helpful],
 * .td-chip, .td-handoff, .td-source, .td-who (who is answering), .td-agent-typing,
 * .td-email (e-mail follow-up form); window.TierdeskWidget.open() / .close().
 *
 * Live updates: while a person is on the way or answering, the widget listens to the
 * conversation's server-sent events (replies, typing, state); when the stream cannot connect
 * it polls the conversation as before (every 3 s, 10 s after two minutes).
 */
(function () {
  "use strict";

  var script = document.currentScript;
  if (!script || window.TierdeskWidget) {
    return;
  }
  var scriptUrl = new URL(script.src, document.baseURI);
  var BASE = (script.getAttribute("data-tierdesk-url") || scriptUrl.origin).replace(/\/+$/, "");
  var NAME = script.getAttribute("data-tierdesk-name") || "Support";
  // A customer identity signed by the host site's server (docs/privacy.md): history follows a
  // verified customer to any device; without one the visitor is anonymous.
  var CUSTOMER_ID = script.getAttribute("data-tierdesk-customer-id") || "";
  var CUSTOMER_HASH = script.getAttribute("data-tierdesk-customer-hash") || "";
  var STORE_KEY = "tierdesk:conversation:" + BASE + (CUSTOMER_ID ? ":" + CUSTOMER_ID : "");
  var POLL_MS = 3000;
  var SLOW_POLL_MS = 10000;
  var SLOW_AFTER_MS = 120000;
  var MAX_CHARS = 2000;
  var PENDING_TEXT = "A person from our team will answer here shortly.";

  var state = {
    conversationId: null,
    seen: {},
    busy: false,
    open: false,
    pollTimer: null,
    pollStarted: 0,
    historyLoaded: false,
    source: null,
    live: false,
    liveFailed: false,
    typingTimer: null,
    emailOffered: false
  };

  // -- small DOM helpers ------------------------------------------------------------------------

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === "text") {
        node.textContent = attrs[key];
      } else if (key === "className") {
        node.className = attrs[key];
      } else if (attrs[key] !== null && attrs[key] !== undefined && attrs[key] !== false) {
        node.setAttribute(key, attrs[key] === true ? "" : String(attrs[key]));
      }
    });
    (children || []).forEach(function (child) {
      if (child) {
        node.appendChild(child);
      }
    });
    return node;
  }

  function storage(action, value) {
    try {
      if (action === "get") {
        return window.localStorage.getItem(STORE_KEY);
      }
      if (action === "set") {
        window.localStorage.setItem(STORE_KEY, value);
      } else {
        window.localStorage.removeItem(STORE_KEY);
      }
    } catch (err) {
      // Storage can be blocked (private mode, sandboxed frames): the chat still works.
    }
    return null;
  }

  function absoluteUrl(path) {
    try {
      return new URL(path, BASE + "/").href;
    } catch (err) {
      return BASE + "/";
    }
  }

  // -- sanitised article HTML, rebuilt from an allow-list -----------------------------------------

  var KEEP = { P: 1, BR: 1, UL: 1, OL: 1, LI: 1, STRONG: 1, B: 1, EM: 1, I: 1, CODE: 1, PRE: 1,
    BLOCKQUOTE: 1, A: 1, H1: 1, H2: 1, H3: 1, H4: 1, H5: 1, H6: 1 };
  var DROP = { SCRIPT: 1, STYLE: 1, IFRAME: 1, OBJECT: 1, EMBED: 1, TEMPLATE: 1, SVG: 1, MATH: 1,
    FORM: 1, INPUT: 1, TEXTAREA: 1, SELECT: 1, BUTTON: 1, NOSCRIPT: 1, LINK: 1, META: 1 };

  function safeHref(href) {
    try {
      var url = new URL(href, BASE + "/");
      return /^(https?|mailto):$/.test(url.protocol) ? url.href : null;
    } catch (err) {
      return null;
    }
  }

  function copySafe(source, target) {
    Array.prototype.forEach.call(source.childNodes, function (node) {
      if (node.nodeType === 3) {
        target.appendChild(document.createTextNode(node.nodeValue));
        return;
      }
      if (node.nodeType !== 1 || DROP[node.nodeName]) {
        return;
      }
      if (!KEEP[node.nodeName]) {
        copySafe(node, target); // unknown element: keep its text, drop the element
        return;
      }
      var tag = /^H[1-6]$/.test(node.nodeName) ? "p" : node.nodeName.toLowerCase();
      var copy = document.createElement(tag);
      if (tag !== node.nodeName.toLowerCase()) {
        copy.className = "td-heading";
      }
      if (tag === "a") {
        var href = safeHref(node.getAttribute("href") || "");
        if (href) {
          copy.setAttribute("href", href);
          copy.setAttribute("target", "_blank");
          copy.setAttribute("rel", "noopener noreferrer");
        }
      }
      copySafe(node, copy);
      target.appendChild(copy);
    });
  }

  function articleFragment(html) {
    var holder = el("div", { className: "td-article" });
    var parsed = new DOMParser().parseFromString(String(html || ""), "text/html");
    copySafe(parsed.body, holder);
    return holder;
  }

  // -- the widget's DOM ---------------------------------------------------------------------------

  var link = el("link", { rel: "stylesheet", href: new URL("widget.css", scriptUrl).href });
  document.head.appendChild(link);

  var launcherIcon = el("span", { className: "td-launcher-icon", "aria-hidden": "true" });
  var badge = el("span", { className: "td-badge", hidden: true, "aria-hidden": "true" });
  var launcher = el("button", {
    id: "tierdesk-launcher", className: "td-launcher", type: "button",
    "aria-label": "Open chat with " + NAME, "aria-expanded": "false",
    "aria-controls": "tierdesk-panel"
  }, [launcherIcon, badge]);

  var closeButton = el("button", {
    className: "td-close", type: "button", "aria-label": "Close chat", text: "\u00d7"
  });
  var header = el("div", { className: "td-header" }, [
    el("div", {}, [
      el("h2", { id: "tierdesk-title", className: "td-title", text: NAME + " assistant" }),
      el("p", { className: "td-subtitle", text: "Answers from our help centre, people when needed" })
    ]),
    closeButton
  ]);
  var log = el("div", {
    className: "td-log", role: "log", "aria-live": "polite", "aria-label": "Conversation"
  });
  var pendingText = el("span", { className: "td-pending-text", text: PENDING_TEXT });
  var pending = el("div", { className: "td-pending", role: "status", hidden: true }, [
    el("span", { className: "td-pending-dot", "aria-hidden": "true" }),
    pendingText
  ]);
  var who = el("div", { className: "td-who", role: "status", hidden: true });
  var agentTyping = el("div", { className: "td-agent-typing", hidden: true, "aria-live": "polite" });
  var errorBox = el("div", { className: "td-error", role: "alert", hidden: true });
  var input = el("textarea", {
    id: "tierdesk-input", className: "td-input", rows: "1", maxlength: String(MAX_CHARS),
    placeholder: "Type your question", "aria-label": "Your message", dir: "auto"
  });
  var sendButton = el("button", {
    className: "td-send", type: "submit", "aria-label": "Send message", text: "Send"
  });
  var form = el("form", { className: "td-form" }, [input, sendButton]);
  var handoffButton = el("button", {
    className: "td-handoff", type: "button", text: "Talk to a person"
  });
  var footer = el("div", { className: "td-footer" }, [handoffButton]);
  var panel = el("section", {
    id: "tierdesk-panel", className: "td-panel", role: "dialog",
    "aria-labelledby": "tierdesk-title", hidden: true
  }, [header, who, log, agentTyping, pending, errorBox, form, footer]);
  var root = el("div", { id: "tierdesk-root", className: "td-root" }, [panel, launcher]);

  // -- rendering messages ------------------------------------------------------------------------

  function scrollToEnd() {
    log.scrollTop = log.scrollHeight;
  }

  function addBubble(node) {
    log.appendChild(node);
    scrollToEnd();
    return node;
  }

  function greet() {
    addBubble(el("div", { className: "td-msg td-msg--bot td-greeting" }, [
      el("p", { text: "Hi! I\u2019m the " + NAME + " assistant. Ask me about cards, payments, " +
        "transfers, top-ups or your account. I\u2019ll bring in a person whenever you need one." })
    ]));
  }

  function renderCustomer(text) {
    return addBubble(el("div", { className: "td-msg td-msg--customer" }, [
      el("span", { className: "td-vh", text: "You said: " }),
      el("p", { className: "td-text", dir: "auto", text: text })
    ]));
  }

  function renderNotice(text) {
    return addBubble(el("div", { className: "td-msg td-msg--notice" }, [
      el("p", { text: text })
    ]));
  }

  function sourceLink(article) {
    return el("a", {
      className: "td-source", href: absoluteUrl(article.url), target: "_blank",
      rel: "noopener noreferrer", text: "Read the article: " + article.title
    });
  }

  // A thumb drawn as an inline SVG (emoji fonts are missing on some systems).
  var SVG_NS = "http://www.w3.org/2000/svg";
  var THUMB_PATHS = ["M2 10h4v11H2z",
    "M8 10l4-8c1.7 0 2.8 1.3 2.4 3L13.6 9H20a2 2 0 0 1 2 2.3l-1.3 8A2 2 0 0 1 18.7 21H8z"];

  function thumbIcon(down) {
    var svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("width", "16");
    svg.setAttribute("height", "16");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    svg.setAttribute("class", down ? "td-thumb td-thumb--down" : "td-thumb");
    THUMB_PATHS.forEach(function (d) {
      var path = document.createElementNS(SVG_NS, "path");
      path.setAttribute("d", d);
      svg.appendChild(path);
    });
    return svg;
  }

  // vote: the customer's stored vote (true, false) or null/undefined while there is none
  function feedbackControls(messageId, vote) {
    var box = el("div", { className: "td-feedback", role: "group", "aria-label": "Was this helpful?" });
    var label = el("span", { className: "td-feedback-label", text: "Did this help?" });
    var yes = el("button", { type: "button", "data-helpful": "true", "aria-pressed": "false",
      "aria-label": "Yes, this helped" }, [thumbIcon(false)]);
    var no = el("button", { type: "button", "data-helpful": "false", "aria-pressed": "false",
      "aria-label": "No, this did not help" }, [thumbIcon(true)]);
    [yes, no].forEach(function (button) {
      button.addEventListener("click", function () {
        sendFeedback(messageId, button.getAttribute("data-helpful") === "true", box, button);
      });
    });
    box.appendChild(label);
    box.appendChild(yes);
    box.appendChild(no);
    if (vote === true || vote === false) {
      markVoted(box, vote ? yes : no); // given before a reload or on another device
    }
    return box;
  }

  function markVoted(box, button) {
    Array.prototype.forEach.call(box.querySelectorAll("button"), function (b) {
      b.disabled = true;
    });
    button.setAttribute("aria-pressed", "true");
    box.classList.add("td-feedback--done");
    box.appendChild(el("span", { className: "td-feedback-thanks", text: "Thanks!" }));
  }

  function renderSuggestions(suggestions) {
    if (!suggestions || !suggestions.length) {
      return;
    }
    var chips = el("div", { className: "td-chips", role: "group", "aria-label": "Related topics" });
    suggestions.forEach(function (item) {
      var chip = el("button", { className: "td-chip", type: "button", text: item.title });
      chip.addEventListener("click", function () {
        send(item.title, false);
      });
      chips.appendChild(chip);
    });
    var atEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    log.appendChild(chips);
    if (atEnd) {
      scrollToEnd(); // otherwise the reader is still on a long answer: do not jump past it
    }
  }

  function renderAnswer(message, answerHtml, article) {
    var bubble = el("div", { className: "td-msg td-msg--bot" }, [
      el("span", { className: "td-vh", text: NAME + " assistant said: " })
    ]);
    if (answerHtml) {
      bubble.appendChild(articleFragment(answerHtml));
    } else {
      bubble.appendChild(el("p", { className: "td-text", text: message.text || "" }));
    }
    if (article) {
      bubble.appendChild(sourceLink(article));
    }
    if (message.id) {
      bubble.appendChild(feedbackControls(message.id, message.feedback));
    }
    addBubble(bubble);
    revealStart(bubble);
    return bubble;
  }

  // A long answer is read from its start: keep the question above it in view when possible.
  function revealStart(bubble) {
    var previous = bubble.previousElementSibling;
    var top = (previous || bubble).offsetTop - log.offsetTop - 8;
    if (log.scrollHeight - top > log.clientHeight) {
      log.scrollTop = Math.max(0, top);
    }
  }

  function renderAgent(message) {
    var bubble = el("div", { className: "td-msg td-msg--agent" }, [
      el("span", { className: "td-author", text: NAME + " team" })
    ]);
    if (message.text) {
      bubble.appendChild(el("p", { className: "td-text", dir: "auto", text: message.text }));
    }
    if (message.html && message.article) {
      bubble.appendChild(articleFragment(message.html));
    }
    if (message.article) {
      bubble.appendChild(sourceLink(message.article));
    }
    bubble.appendChild(feedbackControls(message.id, message.feedback));
    if (!state.open) {
      badge.hidden = false;
    }
    return addBubble(bubble);
  }

  function renderStored(message) {
    if (state.seen[message.id]) {
      return;
    }
    state.seen[message.id] = true;
    if (message.role === "customer") {
      renderCustomer(message.text);
    } else if (message.role === "agent") {
      renderAgent(message);
    } else if (message.status === "answered") {
      renderAnswer(message, message.html, message.article);
    } else {
      renderNotice(message.text);
    }
  }

  function showTyping() {
    return addBubble(el("div", {
      className: "td-msg td-msg--bot td-typing", role: "status", "aria-label": "The assistant is typing"
    }, [el("span", {}), el("span", {}), el("span", {})]));
  }

  function showError(text) {
    errorBox.textContent = text;
    errorBox.hidden = !text;
  }

  // "Talk to a person" is offered only while the bot answers: not while the customer waits for
  // a person (the pending line) or a person answers (who).
  function offerHandoff() {
    var waiting = !pending.hidden || !who.hidden;
    if (waiting && document.activeElement === handoffButton) {
      input.focus(); // not lost to the page when the focused button goes
    }
    handoffButton.hidden = waiting;
  }

  function setPending(on) {
    pending.hidden = !on || !who.hidden;
    offerHandoff();
    if (on) {
      listen();
      offerEmail();
    } else {
      stopListening();
      stopPolling();
    }
  }

  // -- who is answering, live events --------------------------------------------------------------

  function showHandoff(handoff) {
    if (!handoff) {
      return;
    }
    if (handoff.state === "with_person") {
      who.textContent = (handoff.agent || "A person") + " from the " + NAME +
        " team is answering you.";
      who.hidden = false;
      pending.hidden = true;
    } else {
      who.hidden = true;
      who.textContent = "";
    }
    if (handoff.state === "pending") {
      pendingText.textContent = handoff.people_available === false && handoff.back_at ?
        "Our team is away right now; a person will answer from " +
        new Date(handoff.back_at).toLocaleString() + "." : PENDING_TEXT;
    }
    if (handoff.email) {
      state.emailOffered = true;
      removeEmailForm();
    }
    offerHandoff();
  }

  function onLiveEvent(event) {
    if (event.type === "hello" || event.type === "resync") {
      refresh(false);
    } else if (event.type === "message" && event.message) {
      agentTyping.hidden = true;
      renderStored(event.message);
    } else if (event.type === "typing") {
      agentTyping.textContent = (event.agent || "Someone") + " is typing\u2026";
      agentTyping.hidden = false;
      window.clearTimeout(state.typingTimer);
      state.typingTimer = window.setTimeout(function () { agentTyping.hidden = true; }, 5000);
    } else if (event.type === "state") {
      showHandoff({ state: event.state, agent: event.agent });
      if (event.state === "bot") {
        renderNotice("You are talking to the " + NAME + " assistant again.");
        setPending(false);
      } else if (event.state === "resolved") {
        renderNotice("This conversation is resolved. Write again any time.");
        setPending(false);
      } else {
        pending.hidden = !who.hidden;
        offerHandoff();
      }
    }
  }

  function listen() {
    if (state.source || state.liveFailed || !state.conversationId || !window.EventSource) {
      if (!state.source) {
        startPolling();
      }
      return;
    }
    var url = BASE + "/api/v1/conversations/" + encodeURIComponent(state.conversationId) +
      "/events";
    var source = new window.EventSource(url);
    state.source = source;
    source.onopen = function () {
      state.live = true;
      stopPolling();
    };
    source.onmessage = function (message) {
      try {
        onLiveEvent(JSON.parse(message.data));
      } catch (err) {
        // not an event of ours
      }
    };
    source.onerror = function () {
      if (source.readyState === window.EventSource.CLOSED) {
        // Refused (503 on a server without streams, 404, 429): poll instead.
        state.live = false;
        state.liveFailed = true;
        state.source = null;
        startPolling();
      } else if (!state.live) {
        startPolling(); // still connecting: keep the customer up to date meanwhile
      }
    };
  }

  function stopListening() {
    if (state.source) {
      state.source.close();
    }
    state.source = null;
    state.live = false;
  }

  // -- e-mail follow-up -------------------------------------------------------------------------

  var emailForm = null;

  function removeEmailForm() {
    if (emailForm) {
      emailForm.remove();
      emailForm = null;
    }
  }

  function offerEmail() {
    if (state.emailOffered || emailForm || !state.conversationId) {
      return;
    }
    state.emailOffered = true;
    var field = el("input", { type: "email", className: "td-email-input", required: true,
      maxlength: "320", placeholder: "you@example.com", "aria-label": "Your e-mail address" });
    var submit = el("button", { type: "submit", text: "Send me the reply" });
    emailForm = el("form", { className: "td-email" }, [
      el("p", { text: "Leave your e-mail and we will also send the answer there." }),
      field, submit
    ]);
    emailForm.addEventListener("submit", function (event) {
      event.preventDefault();
      submit.disabled = true;
      api("POST", "/conversations/" + encodeURIComponent(state.conversationId) + "/email",
        { email: field.value.trim() }).then(function (result) {
        submit.disabled = false;
        if (result.status !== 200) {
          showError(problem(result));
          return;
        }
        removeEmailForm();
        renderNotice("Thanks! We will also e-mail the answer to " + field.value.trim() + ".");
      }).catch(function () {
        submit.disabled = false;
        showError("We could not save your e-mail address. Please try again.");
      });
    });
    addBubble(emailForm);
  }

  // -- talking to the API -------------------------------------------------------------------------

  function api(method, path, body) {
    var options = { method: method, headers: { Accept: "application/json" }, credentials: "omit" };
    if (CUSTOMER_ID && CUSTOMER_HASH) {
      options.headers["X-Tierdesk-Customer-Id"] = CUSTOMER_ID;
      options.headers["X-Tierdesk-Customer-Hash"] = CUSTOMER_HASH;
    }
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    return fetch(BASE + "/api/v1" + path, options).then(function (response) {
      return response.json().catch(function () {
        return {};
      }).then(function (data) {
        return { status: response.status, data: data, headers: response.headers };
      });
    });
  }

  function problem(result) {
    if (result.status === 429) {
      var wait = result.headers.get("Retry-After") || "a few";
      return "You are sending messages quickly. Please try again in " + wait + " seconds.";
    }
    var error = result.data && result.data.error;
    return (error && error.message) || "Something went wrong. Please try again.";
  }

  function setBusy(on) {
    state.busy = on;
    sendButton.disabled = on;
    handoffButton.disabled = on;
  }

  function send(text, handoff, retried) {
    text = String(text || "").trim();
    if (!text || state.busy) {
      return;
    }
    showError("");
    setBusy(true);
    var customerBubble = retried ? null : renderCustomer(text);
    var typing = showTyping();
    var body = { message: text.slice(0, MAX_CHARS), handoff: !!handoff };
    if (state.conversationId) {
      body.conversation_id = state.conversationId;
    }
    api("POST", "/chat", body).then(function (result) {
      typing.remove();
      setBusy(false);
      if (result.status === 404 && state.conversationId && !retried) {
        forgetConversation(); // the server no longer knows it: start afresh
        send(text, handoff, true);
        return;
      }
      if (result.status !== 200) {
        showError(problem(result));
        failed(customerBubble, text);
        return;
      }
      var data = result.data;
      rememberConversation(data.conversation_id);
      state.seen[data.message_id] = true;
      if (data.status === "with_person") {
        setPending(true); // a person holds the conversation and answers it here
        return;
      }
      if (data.status === "answered" && data.answer) {
        renderAnswer({ id: data.message_id, text: data.answer.text }, data.answer.html,
          data.answer.article);
      } else {
        renderNotice(handoff || data.asked_for_person ?
          "Thanks, we are bringing in a person. " + PENDING_TEXT :
          "I am not sure about this one, so I have asked a colleague. " + PENDING_TEXT);
        setPending(true);
      }
      renderSuggestions(data.suggestions);
    }).catch(function () {
      typing.remove();
      setBusy(false);
      showError("We could not reach the assistant. Check your connection and try again.");
      failed(customerBubble, text);
    });
  }

  // A message that did not go through goes back into the box, to send again without retyping.
  function failed(customerBubble, text) {
    if (!customerBubble) {
      return;
    }
    customerBubble.classList.add("td-failed");
    if (!input.value.trim()) {
      setInput(text);
    }
  }

  // The box grows with its text up to its max-height (widget.css), then scrolls.
  function fitInput() {
    input.style.height = "";
    var border = input.offsetHeight - input.clientHeight;
    if (input.scrollHeight > input.clientHeight) {
      input.style.height = input.scrollHeight + border + "px";
    }
  }

  function setInput(text) {
    input.value = text;
    fitInput();
  }

  function sendFeedback(messageId, helpful, box, button) {
    var buttons = box.querySelectorAll("button");
    Array.prototype.forEach.call(buttons, function (b) {
      b.disabled = true;
    });
    api("POST", "/messages/" + encodeURIComponent(messageId) + "/feedback", { helpful: helpful })
      .then(function (result) {
        if (result.status !== 200) {
          Array.prototype.forEach.call(buttons, function (b) {
            b.disabled = false;
          });
          showError(problem(result));
          return;
        }
        markVoted(box, button);
        if (result.data.escalated) {
          renderNotice("Sorry that did not help. " + PENDING_TEXT);
        }
        if (result.data.conversation_status === "pending_review") {
          setPending(true);
        }
      })
      .catch(function () {
        Array.prototype.forEach.call(buttons, function (b) {
          b.disabled = false;
        });
        showError("We could not send your feedback. Please try again.");
      });
  }

  function rememberConversation(id) {
    state.conversationId = id;
    storage("set", id);
  }

  function forgetConversation() {
    state.conversationId = null;
    storage("remove");
    setPending(false);
  }

  function refresh(firstLoad) {
    if (!state.conversationId) {
      return Promise.resolve();
    }
    return api("GET", "/conversations/" + encodeURIComponent(state.conversationId))
      .then(function (result) {
        if (result.status === 404) {
          forgetConversation();
          return;
        }
        if (result.status !== 200) {
          return;
        }
        result.data.messages.forEach(function (message) {
          // After the first load only replies from people are new to this page.
          if (firstLoad || message.role === "agent") {
            renderStored(message);
          } else {
            state.seen[message.id] = true;
          }
        });
        showHandoff(result.data.handoff);
        setPending(result.data.awaiting_person);
      })
      .catch(function () {
        // Offline for a moment: the next poll tries again.
      });
  }

  function startPolling() {
    if (state.pollTimer) {
      return;
    }
    state.pollStarted = Date.now();
    var tick = function () {
      var slow = Date.now() - state.pollStarted > SLOW_AFTER_MS;
      state.pollTimer = window.setTimeout(function () {
        refresh(false).then(function () {
          if (state.pollTimer) {
            tick();
          }
        });
      }, slow ? SLOW_POLL_MS : POLL_MS);
    };
    tick();
  }

  function stopPolling() {
    if (state.pollTimer) {
      window.clearTimeout(state.pollTimer);
    }
    state.pollTimer = null;
  }

  // -- opening, closing, keyboard -----------------------------------------------------------------

  // Below 480 px the open panel covers the whole page (widget.css): it is a modal dialog there
  // and keeps the keyboard inside; beside a page that stays visible it is not.
  var phone = window.matchMedia ? window.matchMedia("(max-width: 480px)") : null;

  function covering() {
    return state.open && !!phone && phone.matches;
  }

  function markModal() {
    if (covering()) {
      panel.setAttribute("aria-modal", "true");
    } else {
      panel.removeAttribute("aria-modal");
    }
  }

  if (phone) {
    if (phone.addEventListener) {
      phone.addEventListener("change", markModal);
    } else if (phone.addListener) {
      phone.addListener(markModal);
    }
  }

  function focusables() {
    var all = panel.querySelectorAll("a[href], button, input, textarea, select, [tabindex]");
    return Array.prototype.filter.call(all, function (node) {
      return !node.disabled && node.tabIndex >= 0 && node.getClientRects().length > 0;
    });
  }

  // Tab / Shift+Tab wrap round the panel's controls while it covers the page.
  function keepFocusInside(event) {
    if (event.key !== "Tab" || !covering()) {
      return;
    }
    var list = focusables();
    if (!list.length) {
      return;
    }
    var first = list[0];
    var last = list[list.length - 1];
    var inside = panel.contains(document.activeElement);
    if (event.shiftKey && (!inside || document.activeElement === first)) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && (!inside || document.activeElement === last)) {
      event.preventDefault();
      first.focus();
    }
  }

  function openPanel() {
    if (state.open) {
      return;
    }
    state.open = true;
    panel.hidden = false;
    markModal();
    root.classList.add("td-root--open");
    launcher.setAttribute("aria-expanded", "true");
    launcher.setAttribute("aria-label", "Close chat with " + NAME);
    badge.hidden = true;
    scrollToEnd();
    input.focus();
  }

  function closePanel() {
    if (!state.open) {
      return;
    }
    state.open = false;
    panel.hidden = true;
    markModal();
    root.classList.remove("td-root--open");
    launcher.setAttribute("aria-expanded", "false");
    launcher.setAttribute("aria-label", "Open chat with " + NAME);
    launcher.focus();
  }

  launcher.addEventListener("click", function () {
    if (state.open) {
      closePanel();
    } else {
      openPanel();
    }
  });
  closeButton.addEventListener("click", closePanel);
  root.addEventListener("keydown", function (event) {
    if (event.key === "Escape" && state.open) {
      event.preventDefault();
      closePanel();
    }
  });
  document.addEventListener("keydown", keepFocusInside);
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var text = input.value;
    if (!text.trim() || state.busy) {
      return;
    }
    setInput("");
    send(text, false);
  });
  input.addEventListener("input", fitInput);
  input.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit ? form.requestSubmit() : form.dispatchEvent(new Event("submit"));
    }
  });
  handoffButton.addEventListener("click", function () {
    var text = input.value.trim();
    setInput("");
    input.focus(); // the button goes while a person is on the way
    send(text || "I would like to talk to a person, please.", true);
  });

  function mount() {
    document.body.appendChild(root);
    greet();
    // A follow-up e-mail's link lands on #tierdesk-conversation=<id>: continue that one.
    var linked = /tierdesk-conversation=([0-9a-f]{32})/.exec(window.location.hash || "");
    if (linked) {
      storage("set", linked[1]);
      window.history.replaceState(null, "", window.location.pathname + window.location.search);
      window.setTimeout(openPanel, 0);
    }
    var saved = storage("get");
    if (saved && /^[0-9a-f]{32}$/.test(saved)) {
      state.conversationId = saved;
      refresh(true);
    } else if (CUSTOMER_ID && CUSTOMER_HASH) {
      // A verified customer on a new device: resume their latest conversation.
      api("GET", "/customer/conversations").then(function (result) {
        var list = result.status === 200 && result.data.conversations;
        if (list && list.length && !state.conversationId) {
          rememberConversation(list[0].conversation_id);
          refresh(true);
        }
      }).catch(function () {
        // Offline or refused: the widget starts a new conversation when the customer writes.
      });
    }
  }

  window.TierdeskWidget = { open: openPanel, close: closePanel };
  if (document.body) {
    mount();
  } else {
    document.addEventListener("DOMContentLoaded", mount);
  }
})();
