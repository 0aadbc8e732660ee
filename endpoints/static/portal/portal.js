/* webhook-relay portal: small enhancements, loaded as a file (the CSP allows no inline script).
   Every page works without it; it adds copy buttons, relative times, the
   example picker, the endpoint kind picker's instant fields, the auth
   type's fields and the live status of an in-flight delivery. */
(function () {
  "use strict";

  // Copy buttons: <button class="copy" data-copy="text"> or data-copy-from="#id".
  function copyText(button) {
    var text = button.dataset.copy;
    if (text === undefined && button.dataset.copyFrom) {
      var source = document.querySelector(button.dataset.copyFrom);
      text = source ? source.textContent : "";
    }
    var done = function () {
      var label = button.textContent;
      button.textContent = "Copied";
      button.classList.add("copied");
      setTimeout(function () { button.textContent = label; button.classList.remove("copied"); }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text); done(); });
    } else {
      fallbackCopy(text);
      done();
    }
  }

  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
    document.body.removeChild(area);
  }

  // <time datetime="..."> shows "3 min ago"; the UTC time stays in its title.
  function relative(iso, now) {
    var seconds = Math.round((now - new Date(iso).getTime()) / 1000);
    var future = seconds < 0;
    var s = Math.abs(seconds);
    var text;
    if (s < 45) text = "just now";
    else if (s < 90) text = "1 min";
    else if (s < 3600) text = Math.round(s / 60) + " min";
    else if (s < 5400) text = "1 h";
    else if (s < 86400) text = Math.round(s / 3600) + " h";
    else if (s < 172800) text = "1 day";
    else text = Math.round(s / 86400) + " days";
    if (text === "just now") return text;
    return future ? "in " + text : text + " ago";
  }

  function refreshTimes() {
    var now = Date.now();
    document.querySelectorAll("time.rel[datetime]").forEach(function (el) {
      el.textContent = relative(el.getAttribute("datetime"), now);
    });
  }

  // The example picker: choosing a type puts its example in the data box.
  function examplePicker() {
    var source = document.getElementById("examples");
    var select = document.getElementById("id_event_type");
    var data = document.getElementById("id_data");
    if (!source || !select || !data) return;
    var examples = JSON.parse(source.textContent);
    select.addEventListener("change", function () {
      if (examples[select.value] !== undefined) data.value = examples[select.value];
    });
  }

  // A delivery in flight: poll its status and reload once it moves on.
  function pollDelivery() {
    var el = document.getElementById("status");
    if (!el || !el.dataset.poll) return;
    function poll() {
      fetch(el.dataset.poll, { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (d) {
          if (d.status !== el.dataset.status || String(d.attempt_count) !== el.dataset.attempts) {
            window.location.reload();
          } else {
            setTimeout(poll, 1000);
          }
        })
        .catch(function () { setTimeout(poll, 3000); });
    }
    setTimeout(poll, 1000);
  }

  // Bulk replay and other confirmations: <form data-confirm="...">.
  function confirmations() {
    document.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.dataset.confirm)) event.preventDefault();
      });
    });
  }

  // The event-type picker: a search box that hides the types not matching
  // (name or description); groups left empty hide too.
  function typeSearch() {
    var box = document.getElementById("type-search");
    var picker = document.getElementById("type-picker");
    if (!box || !picker) return;
    var none = document.getElementById("type-none");
    box.hidden = false;
    box.addEventListener("input", function () {
      var q = box.value.trim().toLowerCase();
      var shown = 0;
      picker.querySelectorAll(".type-group").forEach(function (group) {
        var inGroup = 0;
        group.querySelectorAll(".type-option").forEach(function (option) {
          var match = !q || option.dataset.search.indexOf(q) !== -1;
          option.hidden = !match;
          if (match) inGroup++;
        });
        group.hidden = inGroup === 0;
        shown += inGroup;
      });
      if (none) none.hidden = shown !== 0;
    });
  }

  // The endpoint form's kind picker: the picked kind's fields show at once.
  // Without this, the picker's own button asks the server for them.
  function kindPicker() {
    var picker = document.getElementById("kind-picker");
    if (!picker) return;
    var button = document.getElementById("pick-kind");
    var url = document.getElementById("id_broker_url");
    function show(kind) {
      document.querySelectorAll("[data-kinds]").forEach(function (el) {
        el.hidden = el.dataset.kinds.split(" ").indexOf(kind) === -1;
      });
      var placeholder = url && url.dataset["placeholder" + kind.charAt(0).toUpperCase() + kind.slice(1)];
      if (placeholder) url.placeholder = placeholder;
    }
    if (button) button.hidden = true;
    // A radio the browser restored (back button) may differ from the page's.
    var checked = picker.querySelector("input[name=kind]:checked");
    if (checked) show(checked.value);
    picker.addEventListener("change", function (event) {
      if (event.target.name === "kind") show(event.target.value);
    });
  }

  // The Authentication page: only the chosen auth type's fields show.
  // Without this every type's fields show, and only the chosen one's are read.
  function authPicker() {
    var picker = document.getElementById("auth-type-picker");
    if (!picker) return;
    function show(type) {
      document.querySelectorAll("[data-auth]").forEach(function (el) {
        el.hidden = el.dataset.auth !== type;
      });
    }
    var checked = picker.querySelector("input[name=auth_type]:checked");
    show(checked ? checked.value : "");
    picker.addEventListener("change", function (event) {
      if (event.target.name === "auth_type") show(event.target.value);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.addEventListener("click", function (event) {
      var button = event.target.closest("button.copy");
      if (button) { event.preventDefault(); copyText(button); }
    });
    refreshTimes();
    setInterval(refreshTimes, 30000);
    examplePicker();
    pollDelivery();
    confirmations();
    typeSearch();
    kindPicker();
    authPicker();
  });
})();
