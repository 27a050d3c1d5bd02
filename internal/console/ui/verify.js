// Checks computed in the browser, with no help from the server: RFC 8785
// (JCS) canonical JSON, the SHA-256 digests of the seed's rules (the event
// chain, d_dna_signature) and the Ed25519 server_signature, with WebCrypto.

// canonical is RFC 8785: members sorted by UTF-16 code units, no white
// space, strings and numbers as ECMAScript's JSON.stringify writes them
// (which is what RFC 8785 specifies).
export function canonical(v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']';
  return '{' + Object.keys(v).sort().map(k => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}';
}

function without(obj, names) {
  const o = Object.assign({}, obj);
  for (const n of names) delete o[n];
  return o;
}

const utf8 = new TextEncoder();

function hex(buf) { return Array.from(new Uint8Array(buf), b => b.toString(16).padStart(2, '0')).join(''); }

export async function sha256(text) {
  return 'sha256:' + hex(await crypto.subtle.digest('SHA-256', utf8.encode(text)));
}

// chainDigest is an event's digest: SHA-256 of the previous digest ("" for
// the first) followed by the event's canonical JSON.
export function chainDigest(prev, event) { return sha256(prev + canonical(event)); }

// seal is d_dna_signature: SHA-256 of the message's canonical JSON without
// d_dna_signature (a VERIFY's covers its server_signature).
export function seal(msg) { return sha256(canonical(without(msg, ['d_dna_signature']))); }

function b64url(s) {
  s = s.replace(/-/g, '+').replace(/_/g, '/');
  while (s.length % 4) s += '=';
  const bin = atob(s);
  return Uint8Array.from(bin, c => c.charCodeAt(0));
}

// verifyServerSignature checks "ed25519:<base64url>" over the VERIFY's
// canonical JSON without d_dna_signature and server_signature, with the
// server's public key (raw 32 bytes, base64url, from /v1/keys/verify).
// It answers true or false, or throws when this browser cannot check.
export async function verifyServerSignature(verify, publicKeyB64) {
  const sig = verify.server_signature || '';
  if (!sig.startsWith('ed25519:')) return false;
  if (!(crypto && crypto.subtle)) throw new Error('WebCrypto is not available (the console needs https or localhost)');
  let key;
  try {
    key = await crypto.subtle.importKey('raw', b64url(publicKeyB64), { name: 'Ed25519' }, false, ['verify']);
  } catch (e) {
    throw new Error('this browser cannot check Ed25519 signatures (' + e.message + ')');
  }
  const data = utf8.encode(canonical(without(verify, ['d_dna_signature', 'server_signature'])));
  let s;
  try { s = b64url(sig.slice('ed25519:'.length)); } catch (e) { return false; }
  return crypto.subtle.verify({ name: 'Ed25519' }, key, s, data);
}
