/*
 * Kassa's hosted card form: the page a shop embeds in an iframe (hosted-payment-page-api.md).
 *
 * The server renders the page with its state in <script type="application/json" id="hpp-state">:
 *   {state: "open" | "requires_action" | "expired" | "error" | "completed" | "canceled", parent_origin,
 *    expires_in (milliseconds left by the server's clock), prefill: {name, postal_code},
 *    endpoints: {pay, challenge, cancel}, result (the result of a session that has ended),
 *    error: {code, message}, receipt (the page, once paid, shows a receipt)}
 * The endpoints answer {outcome: "completed" | "canceled" | "requires_action" | "failed",
 * payment_intent, attempts, last_error}, or an error {error, message, field}.
 * and this script runs the form. It talks to the parent page only with window.parent.postMessage,
 * only to parent_origin (the origin the browser sent as the referrer, never "*"), and only the
 * messages of the spec: {source, type: "resize", height} and {source, type: "result", outcome,
 * payment_intent, attempts, last_error}.
 */
(function () {
  'use strict';

  var SOURCE = 'service-hosted-payment-page';
  var cfg = JSON.parse(document.getElementById('hpp-state').textContent);
  var finished = false;

  // ---- Messages to the parent -------------------------------------------------------------------

  function post(message) {
    if (!cfg.parent_origin || window.parent === window) return;
    message.source = SOURCE;
    window.parent.postMessage(message, cfg.parent_origin);
  }

  var lastHeight = 0;
  var heldResult = null; // a result waiting for the first resize
  function reportHeight() {
    var h = Math.ceil(document.documentElement.getBoundingClientRect().height);
    if (h > 0 && h !== lastHeight) {
      lastHeight = h;
      post({ type: 'resize', height: h });
    }
    if (lastHeight > 0) releaseResult();
  }

  function releaseResult() {
    if (heldResult) post(heldResult);
    heldResult = null;
  }

  // finish posts the one result message of this page and closes the form. The parent hears a height
  // before the result: a frame not laid out yet when the page loaded (a busy browser) measures 0, so a
  // result due at load waits for the first resize, or a second at most.
  function finish(outcome, body) {
    if (finished) return;
    finished = true;
    var msg = { type: 'result', outcome: outcome, attempts: (body && body.attempts) || [], last_error: (body && body.last_error) || null };
    if (body && body.payment_intent) msg.payment_intent = body.payment_intent;
    heldResult = msg;
    reportHeight();
    if (heldResult) setTimeout(releaseResult, 1000);
  }

  // ---- Card rules ---------------------------------------------------------------------------------

  // brands: prefix ranges, valid lengths and CVC length, as the server's card package knows them.
  var brands = [
    { name: 'amex', label: 'American Express', test: /^3[47]/, lengths: [15], cvc: 4, groups: [4, 6, 5] },
    { name: 'visa', label: 'Visa', test: /^4/, lengths: [13, 16, 19], cvc: 3 },
    { name: 'mastercard', label: 'Mastercard', test: /^(5[1-5]|222[1-9]|22[3-9]\d|2[3-6]\d\d|27[01]\d|2720)/, lengths: [16], cvc: 3 },
    { name: 'discover', label: 'Discover', test: /^(6011|65|64[4-9])/, lengths: [16, 17, 18, 19], cvc: 3 },
    { name: 'jcb', label: 'JCB', test: /^(352[89]|35[3-8]\d)/, lengths: [16, 17, 18, 19], cvc: 3 },
    { name: 'diners', label: 'Diners Club', test: /^(30[0-5]|36|3[89])/, lengths: [14, 15, 16, 17, 18, 19], cvc: 3, groups: [4, 6, 4] },
    { name: 'unionpay', label: 'UnionPay', test: /^62/, lengths: [16, 17, 18, 19], cvc: 3 },
  ];

  function brandOf(digits) {
    for (var i = 0; i < brands.length; i++) if (brands[i].test.test(digits)) return brands[i];
    return null;
  }

  function luhn(digits) {
    var sum = 0;
    for (var i = 0; i < digits.length; i++) {
      var d = digits.charCodeAt(digits.length - 1 - i) - 48;
      if (i % 2 === 1) {
        d *= 2;
        if (d > 9) d -= 9;
      }
      sum += d;
    }
    return digits.length > 0 && sum % 10 === 0;
  }

  function formatNumber(digits, brand) {
    var groups = (brand && brand.groups) || [4, 4, 4, 4, 4];
    var out = [];
    var at = 0;
    for (var i = 0; i < groups.length && at < digits.length; i++) {
      out.push(digits.slice(at, at + groups[i]));
      at += groups[i];
    }
    if (at < digits.length) out.push(digits.slice(at));
    return out.join(' ');
  }

  function onlyDigits(s) {
    return s.replace(/\D/g, '');
  }

  // parseExpiry reads "MM / YY", "MM/YYYY" or "MMYY" into {month, year (4 digits)}, or null.
  function parseExpiry(s) {
    var m = /^\s*(\d{1,2})\s*\/\s*(\d{2}|\d{4})\s*$/.exec(s) || /^\s*(\d{2})(\d{2})\s*$/.exec(s);
    if (!m) return null;
    var month = parseInt(m[1], 10);
    var year = parseInt(m[2], 10);
    if (year < 100) year += 2000;
    if (month < 1 || month > 12) return null;
    return { month: month, year: year };
  }

  // ---- The form -----------------------------------------------------------------------------------

  var form = document.getElementById('card-form');
  var fields = {
    number: document.getElementById('card-number'),
    expiry: document.getElementById('card-expiry'),
    cvc: document.getElementById('card-cvc'),
    name: document.getElementById('card-name'),
    postal: document.getElementById('postal-code'),
  };
  var brandLabel = document.getElementById('card-brand');
  var outcome = document.getElementById('outcome');
  var status = document.getElementById('form-status');
  var back = document.getElementById('return');
  var submit = document.getElementById('pay-button');
  var cancel = document.getElementById('cancel-button');
  var challenge = document.getElementById('challenge');

  function setError(field, message) {
    var el = fields[field];
    var err = document.getElementById(el.id + '-error');
    if (message) {
      el.setAttribute('aria-invalid', 'true');
      err.textContent = message;
    } else {
      el.removeAttribute('aria-invalid');
      err.textContent = '';
    }
    reportHeight();
  }

  // validate checks every field, shows each error inline, and returns the first invalid field.
  function validate() {
    var first = null;
    function check(field, message) {
      setError(field, message);
      if (message && !first) first = fields[field];
    }
    var digits = onlyDigits(fields.number.value);
    var brand = brandOf(digits);
    var lengths = brand ? brand.lengths : [12, 13, 14, 15, 16, 17, 18, 19];
    if (!digits) check('number', 'Enter the card number.');
    else if (lengths.indexOf(digits.length) < 0) check('number', 'The card number is too ' + (digits.length < lengths[0] ? 'short.' : 'long.'));
    else if (!luhn(digits)) check('number', 'The card number is not valid.');
    else check('number', '');

    var exp = parseExpiry(fields.expiry.value);
    var now = new Date();
    if (!fields.expiry.value.trim()) check('expiry', 'Enter the expiry date.');
    else if (!exp) check('expiry', 'Enter the expiry date as MM / YY.');
    else if (exp.year < now.getFullYear() || (exp.year === now.getFullYear() && exp.month < now.getMonth() + 1)) check('expiry', 'The card has expired.');
    else if (exp.year > now.getFullYear() + 20) check('expiry', 'The expiry year is too far ahead.');
    else check('expiry', '');

    var cvc = onlyDigits(fields.cvc.value);
    var cvcLen = brand ? brand.cvc : 3;
    if (!cvc) check('cvc', 'Enter the security code.');
    else if (cvc.length !== cvcLen || cvc !== fields.cvc.value.trim()) check('cvc', 'The security code is ' + cvcLen + ' digits.');
    else check('cvc', '');

    if (!fields.name.value.trim()) check('name', 'Enter the name on the card.');
    else if (fields.name.value.length > 200) check('name', 'The name is too long.');
    else check('name', '');

    if (fields.postal.value.length > 20) check('postal', 'The postal code is too long.');
    else check('postal', '');
    return first;
  }

  // say tells where the payment stands (a live status); sayError says what went wrong (an alert, in the
  // error colours). Each message replaces the other, so that the page shows one at a time.
  function say(message, className) {
    outcome.textContent = message;
    outcome.className = className || '';
    status.textContent = '';
    reportHeight();
  }

  function sayError(message) {
    status.textContent = message;
    outcome.textContent = '';
    reportHeight();
  }

  // ended says how checkout ended, once: the page's one success message, or the cancellation or the
  // expiry. Opened on its own rather than in a shop's frame, the page then offers the link back to the
  // shop that the session named (its return_url); in a frame, the shop's page takes over.
  var endings = {
    completed: outcome.getAttribute('data-completed'),
    canceled: 'Payment canceled.',
    expired: 'This payment page has expired. Return to the shop to start again.',
  };
  function ended(how) {
    if (!endings[how]) return;
    say(endings[how], how === 'completed' ? 'done' : '');
    if (back && window.parent === window) {
      back.hidden = false;
      reportHeight();
    }
  }

  function busy(on) {
    submit.disabled = on;
    cancel.disabled = on;
    form.setAttribute('aria-busy', on ? 'true' : 'false');
  }

  function send(url, body) {
    return fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body || {}),
      credentials: 'omit',
    }).then(function (resp) {
      return resp.json().then(function (json) {
        return { status: resp.status, body: json };
      });
    });
  }

  // settle acts on the server's answer to a payment, a challenge or a cancellation.
  function settle(r) {
    busy(false);
    var b = r.body || {};
    if (r.status === 410) return expire();
    if (r.status !== 200) {
      var field = serverFields[b.field];
      if (field) {
        setError(field, b.message);
        fields[field].focus();
      }
      sayError((b.message || 'The payment could not be sent.') + ' Try again.');
      return;
    }
    challenge.hidden = true;
    switch (b.outcome) {
      case 'completed':
        form.hidden = true;
        ended('completed');
        finish('completed', b);
        // Opened on its own, the page loads again to show the receipt its server renders once paid;
        // in a shop's frame the shop's page takes over, and a second load would repeat the result.
        if (cfg.receipt && window.parent === window) window.location.replace(window.location.href);
        return;
      case 'canceled':
        form.hidden = true;
        ended('canceled');
        return finish('canceled', b);
      case 'requires_action':
        form.hidden = true;
        challenge.hidden = false;
        say('Your bank asks you to confirm this payment.');
        document.getElementById('challenge-complete').focus();
        return;
      default: // declined or failed: the form stays open for another try
        form.hidden = false;
        var reason = ((b.last_error && b.last_error.message) || 'Declined').replace(/\.$/, '');
        sayError('Payment declined: ' + reason + '. Check the card or use another one.');
        fields.number.focus();
    }
  }

  function expire() {
    if (finished) return;
    form.hidden = true;
    challenge.hidden = true;
    ended('expired');
    finish('expired', null);
  }

  // payload is the card as POST /v1/payment-methods takes it.
  function payload() {
    var exp = parseExpiry(fields.expiry.value);
    var billing = { name: fields.name.value.trim() };
    if (fields.postal.value.trim()) billing.address = { postal_code: fields.postal.value.trim() };
    return {
      type: 'card',
      card: { number: onlyDigits(fields.number.value), exp_month: exp.month, exp_year: exp.year, cvc: onlyDigits(fields.cvc.value) },
      billing_details: billing,
    };
  }

  // serverFields maps the fields a server error names to the form's.
  var serverFields = {
    'card.number': 'number', 'card.exp_month': 'expiry', 'card.exp_year': 'expiry', 'card.cvc': 'cvc',
    'billing_details.name': 'name', 'billing_details.address.postal_code': 'postal',
  };

  function failed() {
    busy(false);
    sayError('The payment could not be sent. Check your connection and try again.');
  }

  function wire() {
    fields.number.addEventListener('input', function () {
      var digits = onlyDigits(fields.number.value).slice(0, 19);
      var brand = brandOf(digits);
      fields.number.value = formatNumber(digits, brand);
      brandLabel.textContent = brand ? brand.label : '';
      fields.cvc.setAttribute('maxlength', brand && brand.cvc === 4 ? '4' : '3');
    });
    fields.expiry.addEventListener('input', function () {
      var d = onlyDigits(fields.expiry.value).slice(0, 4);
      fields.expiry.value = d.length > 2 ? d.slice(0, 2) + ' / ' + d.slice(2) : d;
    });
    form.addEventListener('submit', function (event) {
      event.preventDefault();
      if (finished) return;
      var invalid = validate();
      if (invalid) {
        sayError('Check the highlighted fields.');
        invalid.focus();
        return;
      }
      busy(true);
      say('Processing the payment…');
      send(cfg.endpoints.pay, payload()).then(settle, failed);
    });
    cancel.addEventListener('click', function () {
      if (finished) return;
      busy(true);
      send(cfg.endpoints.cancel).then(settle, failed);
    });
    ['complete', 'fail'].forEach(function (result) {
      document.getElementById('challenge-' + result).addEventListener('click', function () {
        busy(true);
        send(cfg.endpoints.challenge, { result: result }).then(settle, failed);
      });
    });
    if (cfg.prefill) {
      if (cfg.prefill.name) fields.name.value = cfg.prefill.name;
      if (cfg.prefill.postal_code) fields.postal.value = cfg.prefill.postal_code;
    }
    setTimeout(expire, Math.max(0, Math.min(cfg.expires_in, 2147483647)));
  }

  // ---- Start ----------------------------------------------------------------------------------------

  reportHeight(); // on load, before anything else
  if (typeof ResizeObserver === 'function') new ResizeObserver(reportHeight).observe(document.documentElement);
  switch (cfg.state) {
    case 'open':
      wire();
      break;
    case 'requires_action':
      wire();
      form.hidden = true;
      challenge.hidden = false;
      break;
    case 'expired':
      expire();
      break;
    case 'error':
      finish('error', { last_error: cfg.error });
      break;
    default: // the session ended before this load: say how, again
      ended(cfg.state);
      finish(cfg.state, cfg.result);
  }
})();
