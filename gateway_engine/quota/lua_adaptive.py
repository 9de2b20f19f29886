"""The ADAPT script (shared keys, docs/quota.md "Shared keys"): an answer's remaining-quota headers applied
to a provider's RPM / TPM buckets in Redis, with lua.py's prelude (the adjusted refill itself is in
lua.py's ``load`` / ``wait_for``, so every script sees it). Same arithmetic as adaptive.py."""

from .adaptive import OUTSIDE_MIN_MS, OUTSIDE_STALE_MS
from .lua import PRELUDE

# KEYS: bucket. ARGV: bucket args (1..9), then the reservation's sent mark (requests, tokens; -1: none)
# and per dimension (requests, tokens) remaining (-1: not reported) and ms to its reset (adaptive.py
# follow_dimension, the same arithmetic): the level at most what is left, the refill at most what is
# left over the time to the reset, and the outside-use estimate (fields r* / t*: ra, ru, rwt, rwv, rwm,
# rws, rx, rxt).
ADAPT = (
    (
        PRELUDE
        + """
local now = now_ms()
local r, t, i, o, p, hi, ho = load(KEYS[1], now)
local c = redis.call('HMGET', KEYS[1], 'n', 'k')
local function follow(f, lvl, count, mark, rem, reset, rate)
  if rem < 0 then return lvl, nil, 0 end
  local sent = 0
  if mark >= 0 and mark <= count then sent = count - mark end
  local left = math.max(0, rem - sent)
  local a, u = nil, 0
  if reset > 0 then
    a, u = math.min(rate, left / reset), now + reset
    redis.call('HSET', KEYS[1], f .. 'a', fmt(a), f .. 'u', fmt(u))
  else
    redis.call('HDEL', KEYS[1], f .. 'a', f .. 'u')
  end
  local w = redis.call('HMGET', KEYS[1], f .. 'wt', f .. 'wv', f .. 'wm', f .. 'ws')
  local wt, wm = tonumber(w[1]), tonumber(w[3])
  local restart = wt == nil or now - wt > OUTSIDE_STALE_MS or mark < 0
  if not restart and now - wt >= OUTSIDE_MIN_MS and mark >= wm then
    local span = now - wt
    local used = tonumber(w[2]) - rem + rate * math.min(span, tonumber(w[4]))
    redis.call('HSET', KEYS[1], f .. 'x', fmt(math.max(0, used - (mark - wm)) / span), f .. 'xt', fmt(now))
    restart = true
  end
  if restart then
    redis.call('HSET', KEYS[1], f .. 'wt', fmt(now), f .. 'wv', fmt(rem), f .. 'wm', mark, f .. 'ws', fmt(reset))
  end
  return math.min(lvl, left), a, u
end
r, ra, ru = follow('r', r, tonumber(c[1]) or 0, tonumber(ARGV[10]), tonumber(ARGV[12]), tonumber(ARGV[13]), rr)
t, ta, tu = follow('t', t, tonumber(c[2]) or 0, tonumber(ARGV[11]), tonumber(ARGV[14]), tonumber(ARGV[15]), tr)
store(KEYS[1], now, r, t, i, o, p, hi, ho)
return 1
"""
    )
    .replace("OUTSIDE_STALE_MS", repr(OUTSIDE_STALE_MS))
    .replace("OUTSIDE_MIN_MS", repr(OUTSIDE_MIN_MS))
)
