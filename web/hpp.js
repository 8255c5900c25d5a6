/*
 * Kassa hosted payment page helper, for the shop's own page.
 *
 *   var checkout = KassaHPP.mount({
 *     url: session.url,                 // from POST /v1/checkout/hosted-payment-page/sessions
 *     container: '#payment',            // an element or a selector
 *     onResult: function (result) {},   // {source, type: 'result', outcome, payment_intent, attempts, last_error}
 *   });
 *   checkout.destroy();                 // removes the iframe and stops listening
 *
 * It creates the iframe as the hosted-page spec asks (allow "payment; publickey-credentials-get",
 * referrerpolicy "origin", 520 px to start), accepts a message only when its origin is the origin of
 * the session URL, it comes from that iframe, and its source is "service-hosted-payment-page" (rule
 * 4), resizes the iframe on "resize", and hands every "result" to onResult.
 */
(function (global) {
  'use strict';

  var SOURCE = 'service-hosted-payment-page';
  var START_HEIGHT = 520;

  function mount(options) {
    if (!options || typeof options.url !== 'string') {
      throw new TypeError('KassaHPP.mount: url must be the session URL');
    }
    var origin;
    try {
      origin = new URL(options.url).origin;
    } catch (e) {
      throw new TypeError('KassaHPP.mount: url must be an absolute URL');
    }
    var container = typeof options.container === 'string' ? document.querySelector(options.container) : options.container;
    if (!container || typeof container.appendChild !== 'function') {
      throw new TypeError('KassaHPP.mount: container must be an element or the selector of one');
    }
    if (options.onResult !== undefined && typeof options.onResult !== 'function') {
      throw new TypeError('KassaHPP.mount: onResult must be a function');
    }

    var iframe = document.createElement('iframe');
    iframe.src = options.url;
    iframe.setAttribute('allow', 'payment; publickey-credentials-get');
    iframe.setAttribute('referrerpolicy', 'origin');
    iframe.title = options.title || 'Card payment';
    iframe.style.display = 'block';
    iframe.style.width = '100%';
    iframe.style.border = '0';
    iframe.style.height = START_HEIGHT + 'px';

    function onMessage(event) {
      // Rule 4: the origin of the session URL, and the service's source; and this very iframe.
      if (event.origin !== origin || event.source !== iframe.contentWindow) return;
      var data = event.data;
      if (!data || typeof data !== 'object' || data.source !== SOURCE) return;
      if (data.type === 'resize') {
        if (typeof data.height === 'number' && isFinite(data.height) && data.height > 0) {
          iframe.style.height = Math.ceil(data.height) + 'px';
        }
      } else if (data.type === 'result' && options.onResult) {
        options.onResult(data);
      }
    }

    global.addEventListener('message', onMessage);
    container.appendChild(iframe);
    return {
      iframe: iframe,
      destroy: function () {
        global.removeEventListener('message', onMessage);
        if (iframe.parentNode) iframe.parentNode.removeChild(iframe);
      },
    };
  }

  global.KassaHPP = { mount: mount };
})(typeof window !== 'undefined' ? window : globalThis);
