import { createHmac, randomBytes } from 'node:crypto';
import { isbot } from 'isbot';
import UAParser from 'ua-parser-js';
import { canonicalIp } from '../kit/http/client-ip.js';
import type { Clock } from '../kit/clock.js';
import { countryOf } from './countries.js';

// What one counted redirect records. Only coarse dimensions are kept: the
// hour, the traffic class, the referrer's host, browser/OS family, device type
// and a per-day visitor key that no one can turn back into an address once
// the day's salt is gone, and the country of the address. Never the address, never the full User-Agent.

export type TrafficClass = 'human' | 'bot' | 'preview';

export interface Visit {
  /** Start of the UTC hour, in ms since the epoch. */
  hour: number;
  class: TrafficClass;
  referrer: string;
  browser: string;
  os: string;
  device: string;
  /** ISO 3166-1 alpha-2 code of the client address's country (countries.ts); null when not known. */
  country: string | null;
  /** HMAC-SHA256 (first 16 bytes) of address and User-Agent under the UTC day's salt. */
  visitorKey: Buffer;
}

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;
export const DIRECT = '(direct)';
export const UNKNOWN = '(unknown)';
const MAX_LABEL = 64;
const MAX_HOST = 253;

// Link-unfurling agents: they fetch a link to show a preview card when someone
// pastes it into a chat or a post. They are not people, and not crawlers
// either. isbot knows most of them as bots, so this list is checked first.
// iMessage announces itself as "facebookexternalhit/1.1 Facebot Twitterbot/1.0".
const PREVIEW_AGENTS =
  /slackbot|slack-imgproxy|discordbot|twitterbot|facebookexternalhit|facebot|whatsapp|telegrambot|linkedinbot|skypeuripreview|redditbot|pinterestbot|embedly|iframely|vkshare|mastodon|bluesky|kakaotalk-scrap|line-poker|google-pagerenderer|microsoftpreview|mattermost-bot|bitlybot|xing-contenttabreceiver/i;

/** preview for link-unfurling agents, bot for other automated agents (isbot; no User-Agent at all too), human otherwise. */
export function classifyAgent(userAgent: string | undefined): TrafficClass {
  if (!userAgent) return 'bot';
  if (PREVIEW_AGENTS.test(userAgent)) return 'preview';
  return isbot(userAgent) ? 'bot' : 'human';
}

/** The host of the Referer header only (lower case, no port, path or query); (direct) when there is none. */
export function referrerHost(referer: string | undefined): string {
  if (!referer) return DIRECT;
  try {
    const url = new URL(referer);
    if ((url.protocol === 'http:' || url.protocol === 'https:') && url.hostname) return url.hostname.slice(0, MAX_HOST);
    // android-app://com.slack/ and the like: the app is the source, its scheme the only host-like part.
    return url.protocol === 'android-app:' && url.hostname ? `android-app:${url.hostname.slice(0, MAX_HOST)}` : UNKNOWN;
  } catch {
    return UNKNOWN;
  }
}

export interface AgentFamilies {
  class: TrafficClass;
  browser: string;
  os: string;
  device: string;
}

const label = (text: string | undefined) => (text ? text.slice(0, MAX_LABEL) : UNKNOWN);

/**
 * Traffic class, browser and OS family and device type from ua-parser-js,
 * cached: the same few User-Agents make most traffic, and a parse (and isbot's
 * pattern) runs dozens of regexes. The cache is an LRU of bounded size (a Map
 * keeps insertion order; a hit moves its key to the end), keyed by the first
 * 500 characters, all the parser reads.
 */
export class AgentParser {
  private readonly cache = new Map<string, AgentFamilies>();

  constructor(private readonly maxEntries = 2000) {}

  families(userAgent: string | undefined): AgentFamilies {
    // Agents are classified on what ua-parser-js reads too: the cost per request stays bounded.
    const key = (userAgent ?? '').slice(0, 500);
    const hit = this.cache.get(key);
    if (hit) {
      this.cache.delete(key);
      this.cache.set(key, hit);
      return hit;
    }
    const parsed = new UAParser(key).getResult();
    const families: AgentFamilies = {
      class: classifyAgent(key),
      browser: label(parsed.browser.name),
      os: label(parsed.os.name),
      // ua-parser-js leaves the type empty for desktops (it only names the others),
      // and for everything it does not recognise at all.
      device: label(parsed.device.type ?? (parsed.browser.name || parsed.os.name ? 'desktop' : undefined)),
    };
    this.cache.set(key, families);
    if (this.cache.size > this.maxEntries) this.cache.delete(this.cache.keys().next().value!);
    return families;
  }

  get size(): number {
    return this.cache.size;
  }
}

export const utcDay = (ms: number) => Math.floor(ms / DAY_MS) * DAY_MS;
export const isoDay = (ms: number) => new Date(utcDay(ms)).toISOString().slice(0, 10);

/** Where the day salts live (the database, so every instance uses the same one). */
export interface SaltStore {
  /** The salt of the day (YYYY-MM-DD), created if none exists yet; salts of earlier days are deleted. */
  saltOf(day: string, candidate: Buffer): Promise<Buffer>;
}

/**
 * Daily visitor keys. The salt of a UTC day is random, stored in the database
 * so all instances agree, and deleted when the day is over; this process keeps
 * only the current day's. One database round trip per instance per day.
 */
export class VisitorKeys {
  private current: { day: string; salt: Promise<Buffer> } | undefined;

  constructor(
    private readonly store: SaltStore,
    private readonly clock: Clock,
  ) {}

  async visit(ip: string | undefined, userAgent: string | undefined, referer: string | undefined, parser: AgentParser): Promise<Visit> {
    const now = this.clock();
    const day = isoDay(now);
    const salt = await this.saltOf(day);
    return {
      hour: Math.floor(now / HOUR_MS) * HOUR_MS,
      referrer: referrerHost(referer),
      ...parser.families(userAgent),
      country: countryOf(ip),
      visitorKey: createHmac('sha256', salt)
        .update(`${canonicalIp(ip) ?? ip ?? ''}\n${userAgent ?? ''}`)
        .digest()
        .subarray(0, 16),
    };
  }

  /** Drops this process's copy of a past day's salt (the database's is deleted separately). */
  forgetBefore(day: string): void {
    if (this.current && this.current.day < day) this.current = undefined;
  }

  private saltOf(day: string): Promise<Buffer> {
    if (this.current?.day !== day) {
      const salt = this.store.saltOf(day, randomBytes(32));
      this.current = { day, salt };
      // A failed lookup is retried by the next visit rather than cached.
      salt.catch(() => {
        if (this.current?.salt === salt) this.current = undefined;
      });
    }
    return this.current!.salt;
  }
}
