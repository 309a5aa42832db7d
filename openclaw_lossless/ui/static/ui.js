// The web UI's one script: copy buttons, added where the page marks something to copy. Progressive: without
// it (or with JavaScript off) every page works and the text is there to select by hand. No inline script or
// style anywhere: the Content-Security-Policy allows scripts from this origin only.
//   data-copy="TEXT"           a button after the element copies TEXT (a citation, msg:N)
//   data-copy-label="LABEL"    a button LABEL inside the element copies the text of the element whose id
//                              data-copy-target names (the markdown, which sits in a closed <details>)
"use strict";

(function () {
  function selectText(element) {
    var range = document.createRange();
    range.selectNodeContents(element);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function fallback(element, button) {
    // No clipboard API (an older browser, or a page not served as a secure context): select the text, so
    // Ctrl+C (or the phone's copy menu) takes it, and say so.
    var holder = element.closest("details");
    if (holder) {
      holder.open = true;
    }
    selectText(element);
    var copied = false;
    try {
      copied = document.execCommand("copy");
    } catch (ignored) {
      copied = false;
    }
    done(button, copied ? "Copied" : "Selected: press Ctrl+C to copy");
  }

  function done(button, text) {
    var original = button.getAttribute("data-label");
    button.textContent = text;
    window.setTimeout(function () {
      button.textContent = original;
    }, 2000);
  }

  function copy(text, element, button) {
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () { done(button, "Copied"); },
        function () { fallback(element, button); }
      );
    } else {
      fallback(element, button);
    }
  }

  function button(label, name) {
    var made = document.createElement("button");
    made.type = "button";
    made.className = "copy-button";
    made.textContent = label;
    made.setAttribute("data-label", label);
    made.setAttribute("aria-label", name);
    return made;
  }

  function ready() {
    document.querySelectorAll("[data-copy]").forEach(function (element) {
      var text = element.getAttribute("data-copy");
      var made = button("Copy", "Copy " + text);
      made.addEventListener("click", function () { copy(text, element, made); });
      element.insertAdjacentElement("afterend", made);
    });
    document.querySelectorAll("[data-copy-label]").forEach(function (holder) {
      var source = document.getElementById(holder.getAttribute("data-copy-target"));
      if (!source) {
        return;
      }
      var label = holder.getAttribute("data-copy-label");
      var made = button(label, label);
      made.addEventListener("click", function () { copy(source.textContent, source, made); });
      holder.appendChild(made);
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", ready);
  } else {
    ready();
  }
})();
