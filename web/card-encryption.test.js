// Tests of card-encryption.js under Node's test runner: node --test web/
'use strict';
const test = require('node:test');
const assert = require('node:assert');
const crypto = require('node:crypto');
const ce = require('./card-encryption.js');

const hex = (b) => Buffer.from(b).toString('hex');
const bytes = (s) => new TextEncoder().encode(s);

test('SHA-256 matches the FIPS 180-2 examples', () => {
  assert.strictEqual(hex(ce.sha256(bytes('abc'))), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.strictEqual(hex(ce.sha256(bytes(''))), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  assert.strictEqual(hex(ce.sha256(bytes('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq'))),
    '248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1');
  assert.strictEqual(hex(ce.sha256(bytes('abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu'))),
    'cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1');
  assert.strictEqual(hex(ce.sha256(new Uint8Array(1000000).fill(0x61))),
    'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0');
});

test('SHA-256 agrees with Node at every length around the block boundaries', () => {
  for (let n = 0; n < 200; n++) {
    const m = crypto.randomBytes(n);
    assert.strictEqual(hex(ce.sha256(m)), crypto.createHash('sha256').update(m).digest('hex'), `length ${n}`);
  }
});

test('MGF1-SHA-256 is the counter construction of RFC 8017 B.2.1', () => {
  const seed = bytes('seed');
  const want = Buffer.concat([0, 1, 2].map((c) => crypto.createHash('sha256')
    .update(Buffer.concat([Buffer.from(seed), Buffer.from([0, 0, 0, c])])).digest())).subarray(0, 70);
  assert.strictEqual(hex(ce.mgf1(seed, 70)), want.toString('hex'));
});

test('base64 matches the RFC 4648 §10 vectors', () => {
  const vectors = [['', ''], ['f', 'Zg=='], ['fo', 'Zm8='], ['foo', 'Zm9v'], ['foob', 'Zm9vYg=='], ['fooba', 'Zm9vYmE='], ['foobar', 'Zm9vYmFy']];
  for (const [plain, enc] of vectors) {
    assert.strictEqual(new TextDecoder().decode(ce.base64Decode(enc)), plain);
    assert.strictEqual(ce.base64UrlEncode(bytes(plain)), enc.replace(/=/g, ''));
  }
  assert.strictEqual(ce.base64UrlEncode(new Uint8Array([0xfb, 0xff])), '-_8');
  for (const bad of ['Zg=', 'Z===', 'Zm9v!', 'Zg==Zg==']) assert.strictEqual(ce.base64Decode(bad), null, bad);
});

// A throwaway key pair from Node's own crypto, in the format Kassa hands out.
const { publicKey, privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const pem = publicKey.export({ type: 'spki', format: 'pem' });
const key = Buffer.from(pem).toString('hex');

test('a token opens with the private key to the card', () => {
  const token = globalThis.CardEncryption(key, '4242424242424242', '08', '30', '123');
  const [version, kid, ct] = token.split('.');
  assert.strictEqual(version, 'ct1');
  const der = publicKey.export({ type: 'spki', format: 'der' });
  assert.strictEqual(kid, crypto.createHash('sha256').update(der).digest('hex').slice(0, 16));
  const plain = crypto.privateDecrypt({ key: privateKey, padding: crypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
    Buffer.from(ct, 'base64url'));
  const card = JSON.parse(plain.toString());
  assert.deepStrictEqual([card.n, card.m, card.y, card.c], ['4242424242424242', '08', '30', '123']);
  assert.ok(Math.abs(card.t - Date.now()) < 5000);
  assert.notStrictEqual(globalThis.CardEncryption(key, '4242424242424242', '08', '30', '123'), token, 'fresh randomness');
});

test('arguments that are not strings of digits are TypeErrors naming the argument', () => {
  const good = ['4242424242424242', '08', '30', '123'];
  const names = ['card_number', 'card_month', 'card_year', 'card_cvv2'];
  for (let i = 0; i < 4; i++) {
    for (const bad of [4242424242424242, 8, null, undefined, {}, ['1'], '42 42', '4x', '', '-1', '١٢٣']) {
      const args = good.slice();
      args[i] = bad;
      assert.throws(() => globalThis.CardEncryption(key, ...args), (e) => e instanceof TypeError && e.message.startsWith(names[i]),
        `${names[i]} = ${JSON.stringify(bad)}`);
    }
  }
  for (const [i, bad] of [[0, '42424242424'], [0, '42424242424242424242'], [1, '123'], [2, '203'], [2, '2'], [3, '12'], [3, '12345']]) {
    const args = good.slice();
    args[i] = bad;
    assert.throws(() => globalThis.CardEncryption(key, ...args), (e) => e instanceof RangeError && e.message.startsWith(names[i]));
  }
});

test('a malformed key is a TypeError naming public_encryption_key', () => {
  const ecPem = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' });
  const small = crypto.generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' });
  for (const bad of [undefined, 42, {}, '', 'abc', 'zz', Buffer.from('hello').toString('hex'), Buffer.from(ecPem).toString('hex'),
    Buffer.from(small).toString('hex'), key.slice(0, key.length - 40)]) {
    assert.throws(() => globalThis.CardEncryption(bad, '4242424242424242', '08', '30', '123'),
      (e) => e instanceof TypeError && e.message.startsWith('public_encryption_key'), String(bad).slice(0, 30));
  }
});
