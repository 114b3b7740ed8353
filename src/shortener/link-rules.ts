import { Type } from '@sinclair/typebox';
import { badRequest, HttpError } from '../kit/http/errors.js';
import { isOwnShortLink, MAX_URL_LENGTH, OWN_SHORT_LINK, validateTargetUrl } from './target-urls.js';
import type { TrafficClass } from './visits.js';

/** At most this many split variants besides the main destination. */
export const MAX_SPLIT_VARIANTS = 5;

export type DeviceKind = 'ios' | 'android' | 'desktop';
const DEVICES: DeviceKind[] = ['ios', 'android', 'desktop'];

/** A link's rules as stored (links.rules, migration 012) and shown to its managers. */
export interface LinkRules {
  ios?: string;
  android?: string;
  desktop?: string;
  /** Variants of the main destination; the main one gets 100 minus their percents. */
  split?: Array<{ url: string; percent: number }>;
}

export const LinkRulesSchema = Type.Object({
  ios: Type.Optional(Type.String({ description: 'Where iPhone, iPad and iPod visitors go' })),
  android: Type.Optional(Type.String({ description: 'Where Android visitors go' })),
  desktop: Type.Optional(Type.String({ description: 'Where every other visitor goes' })),
  split: Type.Optional(
    Type.Array(Type.Object({ url: Type.String(), percent: Type.Integer({ minimum: 1, maximum: 99 }) }), {
      maxItems: MAX_SPLIT_VARIANTS,
      description: 'A/B variants; the main destination gets 100 minus their percents (at least 1)',
    }),
  ),
});

export const RULES_DESCRIPTION = `Device rules and an A/B split: {"ios": url, "android": url, "desktop": url, "split": [{"url": url, "percent": 1-99}, ...]}, each key optional; at most ${MAX_SPLIT_VARIANTS} split variants whose percents add to at most 99 (the main destination gets the rest). Every url follows rule 1 like the main one.`;

const RULES_SHAPE = `body/rules must be an object with any of ios, android, desktop (urls) and split (a list of {url, percent})`;

/** One rule's URL checked as the main destination is, its 400 naming where it is. */
function checkUrl(value: unknown, where: string, baseUrl: string): string {
  if (typeof value !== 'string' || value.length < 1 || value.length > MAX_URL_LENGTH) {
    throw badRequest(`${where} must be a url of 1 to ${MAX_URL_LENGTH} characters`);
  }
  try {
    validateTargetUrl(value);
  } catch (err) {
    if (err instanceof HttpError) throw badRequest(`${where}: ${err.message}`);
    throw err;
  }
  if (isOwnShortLink(value, baseUrl)) throw badRequest(`${where}: ${OWN_SHORT_LINK}`);
  return value;
}

/** The rules of a create or change body as stored; null for null or an object without any rule. */
export function parseRules(value: unknown, baseUrl: string): LinkRules | null {
  if (value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) throw badRequest(RULES_SHAPE);
  const given = value as Record<string, unknown>;
  const unknownKey = Object.keys(given).find((k) => k !== 'split' && !DEVICES.includes(k as DeviceKind));
  if (unknownKey !== undefined) throw badRequest(`${RULES_SHAPE}, not "${unknownKey}"`);
  const rules: LinkRules = {};
  for (const device of DEVICES) {
    if (given[device] !== undefined) rules[device] = checkUrl(given[device], `body/rules/${device}`, baseUrl);
  }
  if (given.split !== undefined) {
    const split = given.split;
    if (!Array.isArray(split) || split.length < 1 || split.length > MAX_SPLIT_VARIANTS) {
      throw badRequest(`body/rules/split must be a list of 1 to ${MAX_SPLIT_VARIANTS} variants`);
    }
    rules.split = split.map((variant: unknown, i) => {
      const where = `body/rules/split/${i}`;
      if (typeof variant !== 'object' || variant === null || Array.isArray(variant)) {
        throw badRequest(`${where} must be an object {url, percent}`);
      }
      const { url, percent, ...rest } = variant as Record<string, unknown>;
      if (Object.keys(rest).length > 0) throw badRequest(`${where} must be an object {url, percent}, nothing else`);
      if (typeof percent !== 'number' || !Number.isInteger(percent) || percent < 1 || percent > 99) {
        throw badRequest(`${where}/percent must be an integer from 1 to 99`);
      }
      return { url: checkUrl(url, `${where}/url`, baseUrl), percent };
    });
    const total = rules.split.reduce((sum, v) => sum + v.percent, 0);
    if (total > 99) {
      throw badRequest(
        `body/rules/split percents add to ${total}: they must add to at most 99, so that the main destination keeps at least 1 of the 100`,
      );
    }
  }
  return Object.keys(rules).length === 0 ? null : rules;
}

/** The device a rule is chosen for, from the OS family the visit analytics already parse. */
export function deviceKind(os: string): DeviceKind {
  if (os === 'iOS') return 'ios';
  if (os === 'Android') return 'android';
  return 'desktop';
}

/**
 * Where one visit goes. Bots and link previews get the main destination (a preview card shows
 * what the link reads as). A device rule wins over the split; the split draws at random per
 * request from [0, 100): a variant takes its percent of that range, the main destination the rest.
 */
export function chooseDestination(
  main: string,
  rules: LinkRules | null,
  visitor: { class: TrafficClass; os: string },
  draw: () => number = Math.random,
): string {
  if (rules === null || visitor.class !== 'human') return main;
  const byDevice = rules[deviceKind(visitor.os)];
  if (byDevice !== undefined) return byDevice;
  if (rules.split === undefined) return main;
  let point = draw() * 100;
  for (const variant of rules.split) {
    if (point < variant.percent) return variant.url;
    point -= variant.percent;
  }
  return main;
}
