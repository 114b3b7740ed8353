import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isCommonPassword } from '../src/kit/common-passwords.js';

test('the most common passwords are refused in any case; passphrases and random strings are not', () => {
  for (const common of ['password', 'PASSWORD', 'Password', '12345678', 'qwertyuiop', 'letmein1', 'p@ssw0rd']) {
    assert.equal(isCommonPassword(common), true, common);
  }
  for (const fine of ['correct horse battery', 'a long passphrase', 'vX9#kq2!Lm', 'Wm4-tree-Otter-91']) {
    assert.equal(isCommonPassword(fine), false, fine);
  }
});
