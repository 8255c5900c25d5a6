/*! Kassa card encryption.
 *
 * CardEncryption(public_encryption_key, card_number, card_month, card_year, card_cvv2) returns a card
 * token: the card encrypted with RSA-OAEP (SHA-256, MGF1 with SHA-256, RFC 8017 §7.1) under the
 * merchant's public key, which only the Kassa server can open. Send the token to your server instead
 * of the card fields. Every argument is a string: the key as the dashboard or `kassa merchant keys`
 * gives it, and the card fields as strings of digits.
 *
 * The function is synchronous. Its randomness comes from crypto.getRandomValues; it loads nothing and
 * sends nothing over the network.
 */
(function (root) {
  'use strict';

  // SHA-256 (FIPS 180-4). K: the first 32 bits of the fractional parts of the cube roots of the first
  // 64 primes; H0: of the square roots of the first 8.
  var K = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
  ];
  var H0 = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

  function rotr(x, n) {
    return (x >>> n) | (x << (32 - n));
  }

  function sha256(msg) {
    var len = msg.length;
    var blocks = Math.ceil((len + 9) / 64);
    var p = new Uint8Array(blocks * 64);
    p.set(msg);
    p[len] = 0x80;
    var bits = len * 8; // exact below 2^53
    var hi = Math.floor(bits / 0x100000000);
    var lo = bits >>> 0;
    var end = p.length;
    p[end - 8] = hi >>> 24; p[end - 7] = hi >>> 16; p[end - 6] = hi >>> 8; p[end - 5] = hi;
    p[end - 4] = lo >>> 24; p[end - 3] = lo >>> 16; p[end - 2] = lo >>> 8; p[end - 1] = lo;
    var h = H0.slice();
    var w = new Array(64);
    for (var off = 0; off < end; off += 64) {
      var i;
      for (i = 0; i < 16; i++) {
        var j = off + i * 4;
        w[i] = ((p[j] << 24) | (p[j + 1] << 16) | (p[j + 2] << 8) | p[j + 3]) >>> 0;
      }
      for (i = 16; i < 64; i++) {
        var s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
        var s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) >>> 0;
      }
      var a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
      for (i = 0; i < 64; i++) {
        var t1 = (k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i]) >>> 0;
        var t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
        k = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = b; b = a; a = (t1 + t2) >>> 0;
      }
      h[0] = (h[0] + a) >>> 0; h[1] = (h[1] + b) >>> 0; h[2] = (h[2] + c) >>> 0; h[3] = (h[3] + d) >>> 0;
      h[4] = (h[4] + e) >>> 0; h[5] = (h[5] + f) >>> 0; h[6] = (h[6] + g) >>> 0; h[7] = (h[7] + k) >>> 0;
    }
    var out = new Uint8Array(32);
    for (var n = 0; n < 8; n++) {
      out[n * 4] = h[n] >>> 24; out[n * 4 + 1] = h[n] >>> 16; out[n * 4 + 2] = h[n] >>> 8; out[n * 4 + 3] = h[n];
    }
    return out;
  }

  // MGF1 with SHA-256 (RFC 8017 B.2.1).
  function mgf1(seed, length) {
    var out = new Uint8Array(length);
    var input = new Uint8Array(seed.length + 4);
    input.set(seed);
    for (var counter = 0, pos = 0; pos < length; counter++, pos += 32) {
      input[seed.length] = counter >>> 24; input[seed.length + 1] = counter >>> 16;
      input[seed.length + 2] = counter >>> 8; input[seed.length + 3] = counter;
      var block = sha256(input);
      out.set(block.subarray(0, Math.min(32, length - pos)), pos);
    }
    return out;
  }

  var B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

  // base64Decode reads standard base64 (RFC 4648 §4), ignoring whitespace; null when malformed.
  function base64Decode(text) {
    text = text.replace(/\s+/g, '');
    if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return null;
    var pad = text.charAt(text.length - 1) === '=' ? (text.charAt(text.length - 2) === '=' ? 2 : 1) : 0;
    var out = new Uint8Array(text.length / 4 * 3 - pad);
    for (var i = 0, o = 0; i < text.length; i += 4) {
      var v = 0;
      for (var j = 0; j < 4; j++) {
        var ch = text.charAt(i + j);
        v = v * 64 + (ch === '=' ? 0 : B64.indexOf(ch));
      }
      if (o < out.length) out[o++] = (v >>> 16) & 0xff;
      if (o < out.length) out[o++] = (v >>> 8) & 0xff;
      if (o < out.length) out[o++] = v & 0xff;
    }
    return out;
  }

  // base64UrlEncode writes base64url without padding (RFC 4648 §5).
  function base64UrlEncode(bytes) {
    var s = '';
    for (var i = 0; i < bytes.length; i += 3) {
      var n = (bytes[i] << 16) | ((i + 1 < bytes.length ? bytes[i + 1] : 0) << 8) | (i + 2 < bytes.length ? bytes[i + 2] : 0);
      var chunk = B64.charAt((n >>> 18) & 63) + B64.charAt((n >>> 12) & 63) +
        (i + 1 < bytes.length ? B64.charAt((n >>> 6) & 63) : '') + (i + 2 < bytes.length ? B64.charAt(n & 63) : '');
      s += chunk;
    }
    return s.replace(/\+/g, '-').replace(/\//g, '_');
  }

  function hex(bytes) {
    var s = '';
    for (var i = 0; i < bytes.length; i++) s += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
    return s;
  }

  function badKey(why) {
    return new TypeError('public_encryption_key is not a Kassa public encryption key (' + why + ')');
  }

  // der reads one DER element (tag, length, contents) at pos of b.
  function der(b, pos, tag) {
    if (pos + 2 > b.length || b[pos] !== tag) throw badKey('unexpected DER structure');
    var len = b[pos + 1];
    var start = pos + 2;
    if (len & 0x80) {
      var n = len & 0x7f;
      if (n < 1 || n > 3 || start + n > b.length) throw badKey('bad DER length');
      len = 0;
      for (var i = 0; i < n; i++) len = len * 256 + b[start + i];
      start += n;
    }
    if (start + len > b.length) throw badKey('truncated DER');
    return { start: start, end: start + len };
  }

  var RSA_OID = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01]; // 1.2.840.113549.1.1.1

  // parseKey reads the hex of a PEM "PUBLIC KEY" (X.509 SubjectPublicKeyInfo) holding an RSA key.
  function parseKey(encoded) {
    if (typeof encoded !== 'string') throw new TypeError('public_encryption_key must be a string');
    if (encoded.length === 0 || encoded.length % 2 !== 0 || !/^[0-9A-Fa-f]+$/.test(encoded)) throw badKey('not hex');
    var pem = '';
    for (var i = 0; i < encoded.length; i += 2) pem += String.fromCharCode(parseInt(encoded.substr(i, 2), 16));
    var m = /-----BEGIN PUBLIC KEY-----([A-Za-z0-9+/=\s]+)-----END PUBLIC KEY-----/.exec(pem);
    if (!m) throw badKey('not a PEM public key');
    var spki = base64Decode(m[1]);
    if (!spki) throw badKey('bad base64');
    var outer = der(spki, 0, 0x30);
    var alg = der(spki, outer.start, 0x30);
    var oid = der(spki, alg.start, 0x06);
    if (oid.end - oid.start !== RSA_OID.length) throw badKey('not an RSA key');
    for (i = 0; i < RSA_OID.length; i++) if (spki[oid.start + i] !== RSA_OID[i]) throw badKey('not an RSA key');
    var bits = der(spki, alg.end, 0x03);
    if (spki[bits.start] !== 0) throw badKey('bad BIT STRING');
    var rsa = der(spki, bits.start + 1, 0x30);
    var nEl = der(spki, rsa.start, 0x02);
    var eEl = der(spki, nEl.end, 0x02);
    var n = toBigInt(spki.subarray(nEl.start, nEl.end));
    var e = toBigInt(spki.subarray(eEl.start, eEl.end));
    var k = byteLength(n);
    if (k < 256 || k > 512) throw badKey('the modulus must be 2048 to 4096 bits');
    if (e < BigInt(3) || e % BigInt(2) === BigInt(0)) throw badKey('bad public exponent');
    return { n: n, e: e, k: k, id: hex(sha256(spki)).substr(0, 16) };
  }

  function toBigInt(bytes) {
    var v = BigInt(0);
    for (var i = 0; i < bytes.length; i++) v = (v << BigInt(8)) | BigInt(bytes[i]);
    return v;
  }

  function byteLength(v) {
    var n = 0;
    while (v > BigInt(0)) { v >>= BigInt(8); n++; }
    return n;
  }

  function toBytes(v, k) {
    var out = new Uint8Array(k);
    for (var i = k - 1; i >= 0; i--) { out[i] = Number(v & BigInt(0xff)); v >>= BigInt(8); }
    return out;
  }

  function modPow(b, e, m) {
    var r = BigInt(1);
    b %= m;
    while (e > BigInt(0)) {
      if (e & BigInt(1)) r = (r * b) % m;
      e >>= BigInt(1);
      b = (b * b) % m;
    }
    return r;
  }

  function randomBytes(n) {
    var c = root.crypto;
    if (!c || typeof c.getRandomValues !== 'function') throw new Error('CardEncryption needs crypto.getRandomValues');
    var out = new Uint8Array(n);
    c.getRandomValues(out);
    return out;
  }

  // encryptOAEP is RSAES-OAEP-ENCRYPT (RFC 8017 §7.1.1) with SHA-256, MGF1-SHA-256 and an empty label.
  function encryptOAEP(key, msg) {
    var hLen = 32, k = key.k;
    if (msg.length > k - 2 * hLen - 2) throw new RangeError('message too long');
    var db = new Uint8Array(k - hLen - 1);
    db.set(sha256(new Uint8Array(0)), 0);
    db[db.length - msg.length - 1] = 0x01;
    db.set(msg, db.length - msg.length);
    var seed = randomBytes(hLen);
    var dbMask = mgf1(seed, db.length);
    for (var i = 0; i < db.length; i++) db[i] ^= dbMask[i];
    var seedMask = mgf1(db, hLen);
    for (i = 0; i < hLen; i++) seed[i] ^= seedMask[i];
    var em = new Uint8Array(k);
    em.set(seed, 1);
    em.set(db, 1 + hLen);
    return toBytes(modPow(toBigInt(em), key.e, key.n), k);
  }

  function digits(name, value, min, max) {
    if (typeof value !== 'string' || !/^[0-9]+$/.test(value)) {
      throw new TypeError(name + ' must be a string of digits');
    }
    if (value.length < min || value.length > max) {
      throw new RangeError(name + ' must have ' + (min === max ? min : min + ' to ' + max) + ' digits');
    }
  }

  function CardEncryption(publicEncryptionKey, cardNumber, cardMonth, cardYear, cardCvv2) {
    var key = parseKey(publicEncryptionKey);
    digits('card_number', cardNumber, 12, 19);
    digits('card_month', cardMonth, 1, 2);
    digits('card_year', cardYear, 2, 4);
    if (cardYear.length === 3) throw new RangeError('card_year must have 2 or 4 digits');
    digits('card_cvv2', cardCvv2, 3, 4);
    var json = '{"n":"' + cardNumber + '","m":"' + cardMonth + '","y":"' + cardYear + '","c":"' + cardCvv2 +
      '","t":' + Date.now() + '}';
    var msg = new Uint8Array(json.length);
    for (var i = 0; i < json.length; i++) msg[i] = json.charCodeAt(i);
    return 'ct1.' + key.id + '.' + base64UrlEncode(encryptOAEP(key, msg));
  }

  root.CardEncryption = CardEncryption;
  if (typeof module === 'object' && module.exports) {
    // For the script's own tests under Node; browsers see only CardEncryption.
    module.exports = { CardEncryption: CardEncryption, sha256: sha256, mgf1: mgf1, base64Decode: base64Decode,
      base64UrlEncode: base64UrlEncode };
  }
})(typeof globalThis !== 'undefined' ? globalThis : this);
