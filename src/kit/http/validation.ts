import { Ajv, type Options as AjvOptions } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { badRequest } from './errors.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

function makeAjv(opts: AjvOptions): Ajv {
  const ajv = new Ajv({ removeAdditional: true, useDefaults: true, allErrors: false, ...opts });
  addFormats(ajv);
  // TypeBox schemas carry these keywords.
  ajv.addKeyword({ keyword: 'kind' });
  ajv.addKeyword({ keyword: 'modifier' });
  return ajv;
}

/**
 * Bodies are validated strictly (a number is not a string); query strings and
 * path params arrive as text, so those are coerced to the declared types.
 */
export function validateRequests(app: FastifyInstance): void {
  const bodyAjv = makeAjv({ coerceTypes: false });
  const textAjv = makeAjv({ coerceTypes: 'array' });
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart === 'body') return bodyAjv.compile(schema as object);
    const validate = textAjv.compile(schema as object);
    // Coercion turns the text "1e400" into Infinity, which Ajv then exempts from
    // minimum/maximum: a query like ?page=1e400 must fail here, not in SQL.
    const check = (data: unknown) => {
      if (!validate(data)) {
        check.errors = validate.errors;
        return false;
      }
      for (const [key, value] of Object.entries((data ?? {}) as Record<string, unknown>)) {
        if (typeof value === 'number' && !Number.isFinite(value))
          return { error: badRequest(`${httpPart}/${key} must be a finite number`) };
      }
      return true;
    };
    check.errors = validate.errors;
    return check;
  });
}

const itemAjv = makeAjv({ coerceTypes: false });

/**
 * A validator of one value against a body schema, with the options and the message Fastify gives
 * a request body (`body/url must be string`): for bodies holding many items, each checked as if
 * it had been a body of its own. Returns the message, or undefined when the value is valid (the
 * value is then cleaned as a body is: additional properties removed, defaults applied).
 */
export function bodyValidator(schema: object): (value: unknown) => string | undefined {
  const validate = itemAjv.compile(schema);
  return (value) => {
    if (validate(value)) return undefined;
    return (validate.errors ?? []).map((e) => `body${e.instancePath} ${e.message}`).join(', ');
  };
}
