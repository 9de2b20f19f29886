"""Lua scripts of the Redis quota store. Same semantics as the in-process store (local_buckets.py,
local_leases.py, local_ledger.py over local_state.py).

Keys per provider (hash-tagged so they share a cluster slot):
  {prefix}q:{<name>}:b   hash: r (RPM tokens), t (TPM tokens), i / o (ITPM / OTPM tokens, only while the
                          limits set itpm / otpm), ts (ms of the last update), p (429 paused until, ms);
                          adaptive providers (shared keys, ADAPT): n / k (requests / tokens granted),
                          ra / ru and ta / tu (adjusted RPM / TPM rate per ms, until ms), rx / tx (outside
                          use per ms, at rxt / txt) and the outside-use window rw* / tw*
  {prefix}q:{<name>}:o   hash: 60 one-second slots s<i> (second), r<i> (grants), t<i> (tokens) — observed rates
  {prefix}q:{<name>}:l   sorted set: lease id -> expiry (server ms)
  {prefix}q:{<name>}:iw   sorted set: process waiter id -> mark expiry (server ms): interactive callers of
                          that process wait for this provider; batch ACQUIREs yield while one is live
  {prefix}q:{<name>}:pause  hash: reason, until (epoch ms, '' = until lifted), message, since (epoch ms) —
                          the provider pause; PEXPIREAT until when it has one. Apart from the bucket
                          hash, so no limit change, bucket expiry or 429 clear_pause touches it.

  the team's buckets (share cap; RPM / TPM across providers): lua_team.py
  {prefix}budget:{<team>}:d:<YYYY-MM-DD> / :m:<YYYY-MM>   string: tokens used in that UTC day / month

Bucket ARGV[1..9] on every call: rate per ms and capacity of RPM, TPM, ITPM, OTPM (an ITPM / OTPM rate
of 0: the provider does not set it, no such bucket) and whether the provider is adaptive — so a changed limit applies (and a lowered
capacity clamps) on the very next call. Times come from Redis TIME. A missing bucket key or field means
"full"; the key expires once every bucket would have refilled completely.
"""

from .lua_leases import TAKE_LEASE
from .lua_team import TEAM_FUNCTIONS

# how long a batch ask is told to wait while an interactive caller waits for the provider (ms): it asks
# again then (docs/engine.md, "Interactive first")
YIELD_MS = 50

PRELUDE = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local function fmt(x) return string.format('%.17g', x) end
local EPS = 1e-9
-- ARGV[1..8]: rate per ms and capacity of RPM, TPM, ITPM, OTPM (ITPM / OTPM rate 0: not configured);
-- ARGV[9]: '1' when the provider is adaptive (shared keys: RPM / TPM follow the ADAPT state).
-- Plain locals, no tables: ACQUIRE runs on every grant of every worker, and Redis runs one script at a time.
local rr, rc, tr, tc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local ir, ic, orr, oc = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local adaptive = ARGV[9] == '1'
-- the adjusted refill of RPM / TPM (adaptive: rate per ms and until when, server ms; nil: configured)
local ra, ru, ta, tu = nil, 0, nil, 0
-- one bucket's level refilled over el ms, clamped to its capacity (a missing field: full; unset: 0)
local function level(v, el, rate, cap)
  v = tonumber(v)
  if v == nil or rate == 0 then return cap end
  return math.min(cap, v + el * rate)
end

-- an RPM / TPM level at ts refilled to now: at min(rate, a) until u, then at rate (adaptive.py slowed_level)
local function alevel(v, ts, now, rate, cap, a, u)
  v = tonumber(v)
  if v == nil then return cap end
  local el = now - ts
  if el < 0 then el = 0 end
  if a ~= nil and u > ts then
    local part = math.min(now, u) - ts
    return math.min(cap, v + part * math.min(rate, a) + (el - part) * rate)
  end
  return math.min(cap, v + el * rate)
end

-- -> r, t, i, o tokens now, the 429 pause end, and whether i / o are stored (store HDELs them once unset)
local function load(key, now)
  local h = redis.call('HMGET', key, 'r', 't', 'i', 'o', 'ts', 'p', 'ra', 'ru', 'ta', 'tu')
  local ts = tonumber(h[5]) or now
  local el = now - ts
  if el < 0 then el = 0 end
  if adaptive then
    ra, ru, ta, tu = tonumber(h[7]), tonumber(h[8]) or 0, tonumber(h[9]), tonumber(h[10]) or 0
  end
  return alevel(h[1], ts, now, rr, rc, ra, ru), alevel(h[2], ts, now, tr, tc, ta, tu), level(h[3], el, ir, ic),
    level(h[4], el, orr, oc), tonumber(h[6]) or 0, h[3] ~= false, h[4] ~= false
end

local function short(w, have, need, rate)
  if rate > 0 and have < need - EPS then return math.max(w, (need - have) / rate) end
  return w
end

-- short() for RPM / TPM at their adjusted refill (adaptive.py slowed_wait)
local function ashort(w, now, have, need, rate, a, u)
  if rate <= 0 or have >= need - EPS then return w end
  if a ~= nil and u > now then
    local slower = math.min(rate, a)
    local gain = (u - now) * slower
    if have + gain >= need - EPS then return math.max(w, (need - have) / slower) end
    return math.max(w, (u - now) + (need - have - gain) / rate)
  end
  return math.max(w, (need - have) / rate)
end
-- ms until 1 request, n / ni / no tokens fit (ITPM / OTPM where set) and the 429 pause p is over:
-- the longest of the waits
local function wait_for(now, r, t, i, o, p, n, ni, no)
  local w = 0
  if p > now then w = p - now end
  w = ashort(ashort(w, now, r, 1, rr, ra, ru), now, t, n, tr, ta, tu)
  return short(short(w, i, ni, ir), o, no, orr)
end

local function store(key, now, r, t, i, o, p, hi, ho)
  local fr, ft, fts, fp = fmt(r), fmt(t), fmt(now), fmt(p)
  if ir > 0 and orr > 0 then
    redis.call('HSET', key, 'r', fr, 't', ft, 'i', fmt(i), 'o', fmt(o), 'ts', fts, 'p', fp)
  elseif ir > 0 then
    redis.call('HSET', key, 'r', fr, 't', ft, 'i', fmt(i), 'ts', fts, 'p', fp)
  elseif orr > 0 then
    redis.call('HSET', key, 'r', fr, 't', ft, 'o', fmt(o), 'ts', fts, 'p', fp)
  else
    redis.call('HSET', key, 'r', fr, 't', ft, 'ts', fts, 'p', fp)
  end
  -- expire once every bucket is full again (and any 429 pause is over): a missing key means full
  local ttl = math.max((rc - r) / rr, (tc - t) / tr, p - now, 0)
  -- an adjusted refill is slower: the key lives at least until it ends, plus the configured refill
  if adaptive then ttl = ttl + math.max(0, ru - now, tu - now) end
  -- an unset itpm / otpm drops its field: set again later, that bucket starts full, not stale
  if ir > 0 then ttl = math.max(ttl, (ic - i) / ir) elseif hi then redis.call('HDEL', key, 'i') end
  if orr > 0 then ttl = math.max(ttl, (oc - o) / orr) elseif ho then redis.call('HDEL', key, 'o') end
  redis.call('PEXPIRE', key, math.ceil(ttl) + 1000)
end

-- the provider pause, as ACQUIRE / LEASE_ACQUIRE answer it: {3, reason, until, message, since}, or nil
local function paused(key)
  local z = redis.call('HMGET', key, 'reason', 'until', 'message', 'since')
  if not z[1] then return nil end
  return {3, z[1], z[2] or '', z[3] or '', z[4] or '0'}
end

local function observe(key, now, dr, dt)
  local sec = math.floor(now / 1000)
  local slot = sec % 60
  local sk = 's' .. slot
  if tonumber(redis.call('HGET', key, sk)) ~= sec then
    redis.call('HSET', key, sk, sec, 'r' .. slot, dr, 't' .. slot, dt)
  else
    if dr ~= 0 then redis.call('HINCRBY', key, 'r' .. slot, dr) end
    if dt ~= 0 then redis.call('HINCRBY', key, 't' .. slot, dt) end
  end
  redis.call('PEXPIRE', key, 61000)
end
"""

# KEYS: bucket, obs, pause, interactive waiters [, leases: ADMIT only] [, share bucket] [, team bucket,
# team observed rates]. ARGV: bucket args (1..9), n, ni, no, yield (1: a batch ask, which yields to waiting
# interactive callers; 0: an interactive ask), the team ARGV (14..19, lua_team.py); ADMIT: lease id,
# max concurrency, lease ttl ms (20..22).
# -> {status, wait_ms, now [, requests granted, tokens granted]}: status 0 granted (adaptive: with the
#    grant counters n / k just after this grant, the reservation's sent mark), 1 wait (the longest over the buckets; a batch ask while an
#    interactive caller waits for this provider: YIELD_MS; {1, wait, now, 1}: only the team's buckets are short),
#    2 impossible (an amount above its bucket's capacity); or {3, reason, until, message, since}: paused;
#    ADMIT: 4 every lease of the provider is held (wait_ms: until the earliest expires) — nothing taken.
# Every bucket (RPM 1, TPM n, ITPM ni, OTPM no where set, the team's: share 1, RPM 1, TPM n) grants, or none
# does; ADMIT takes the provider's concurrency lease in the same step (the leases key shares the provider's
# hash slot), so both are taken or neither: no token is ever taken to be given back for a busy lease.
_GRANT = """
local pz = paused(KEYS[3])
if pz then return pz end
local n, ni, no = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
local now = now_ms()
if n > tc or ni > ic or no > oc then return {2, 0, fmt(now)} end  -- unset ITPM / OTPM: 0 > 0 never
if ARGV[13] == '1' and redis.call('ZCOUNT', KEYS[4], '(' .. fmt(now), '+inf') > 0 then
  return {1, YIELD_MS, fmt(now)}  -- interactive callers wait for this provider: they go first
end
local r, t, i, o, p, hi, ho = load(KEYS[1], now)
local w = wait_for(now, r, t, i, o, p, n, ni, no)
local sk, tk = team_keys(LEASES + 5, 14)
local mr, qv, kv, tw = team_ask(sk, tk, now, n, 14)
if tw < 0 then return {2, 0, fmt(now)} end  -- above the team's TPM bucket
if tw > 0 then
  if w <= 0 then return {1, math.max(1, math.ceil(tw)), fmt(now), 1} end  -- only the team waits
  w = math.max(w, tw)
end
if w > 0 then return {1, math.max(1, math.ceil(w)), fmt(now)} end
if LEASES > 0 then
  local busy = take_lease(KEYS[5], ARGV[20], tonumber(ARGV[21]), tonumber(ARGV[22]))
  if busy > 0 then return {4, busy, fmt(now)} end
end
store(KEYS[1], now, r - 1, t - n, i - ni, o - no, p, hi, ho)
team_move(sk, tk, now, mr, qv, kv, 1, n, 14)
observe(KEYS[2], now, 1, n)
if adaptive then
  return {0, 0, fmt(now), redis.call('HINCRBY', KEYS[1], 'n', 1), redis.call('HINCRBY', KEYS[1], 'k', ARGV[10])}
end
return {0, 0, fmt(now)}
""".replace("YIELD_MS", str(YIELD_MS))

# the bucket grant alone (store.acquire)
ACQUIRE = PRELUDE + TEAM_FUNCTIONS + "local LEASES = 0\n" + _GRANT
# the bucket grant and the provider's concurrency lease in one atomic step (store.admit, the engine's)
ADMIT = PRELUDE + TEAM_FUNCTIONS + TAKE_LEASE + "local LEASES = 1\n" + _GRANT

# KEYS: interactive waiters. ARGV: member (one process's waiters for this provider), ttl ms.
# The member's mark lasts ttl ms (server clock) unless renewed; expired marks are dropped.
INTERACTIVE_MARK = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl + 1000)
return 1
"""

# KEYS: interactive waiters. Read-only. -> the number of live marks (processes with a waiting caller)
INTERACTIVE_COUNT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
"""

# KEYS: bucket, obs [, team bucket, team observed rates]. ARGV: bucket args (1..9), d, di, do (actual -
# reserved per TPM, ITPM, OTPM; negative = refund, clamped to capacity), the team ARGV (13..18, share
# "0"), the team TPM's d (19)
_RECONCILE_BODY = """
local d = tonumber(ARGV[10])
local now = now_ms()
local r, t, i, o, p, hi, ho = load(KEYS[1], now)
store(KEYS[1], now, r, math.min(tc, t - d), math.min(ic, i - tonumber(ARGV[11])),
  math.min(oc, o - tonumber(ARGV[12])), p, hi, ho)
observe(KEYS[2], now, 0, d)
local _, tk = team_keys(3, 13)
if tk > 0 then
  local _, qv, kv = team_ask(0, tk, now, 0, 13)
  team_move(0, tk, now, nil, qv, kv, 0, tonumber(ARGV[19]), 13)
end
"""
RECONCILE = PRELUDE + TEAM_FUNCTIONS + _RECONCILE_BODY + "return 1\n"


def settle_script(outcome_function: str) -> str:
    """SETTLE: RECONCILE with a caller's step after it in the same atomic script (the breaker's success:
    ``outcome_function`` defines ``local function outcome(key, a)``). KEYS: RECONCILE's, then the step's
    key (the last); ARGV: RECONCILE's 19, then the step's from 20. Answers what the step answers."""
    return PRELUDE + TEAM_FUNCTIONS + outcome_function + _RECONCILE_BODY + "return outcome(KEYS[#KEYS], 20)\n"


# KEYS: bucket, obs, pause (unread) [, share bucket] [, team bucket, team observed rates]. ARGV: bucket
# args (1..9), n, ni, no, the team ARGV (13..18). Gives back an unused grant (1 request, the tokens; the
# team's share, RPM and TPM tokens), each clamped to its capacity; the observed counters are decremented too.
RELEASE = (
    PRELUDE
    + TEAM_FUNCTIONS
    + """
local n = tonumber(ARGV[10])
local now = now_ms()
local r, t, i, o, p, hi, ho = load(KEYS[1], now)
store(KEYS[1], now, math.min(rc, r + 1), math.min(tc, t + n), math.min(ic, i + tonumber(ARGV[11])),
  math.min(oc, o + tonumber(ARGV[12])), p, hi, ho)
local sk, tk = team_keys(4, 13)
local mr, qv, kv = team_ask(sk, tk, now, 0, 13)
team_move(sk, tk, now, mr, qv, kv, -1, -n, 13)
observe(KEYS[2], now, -1, -n)
return 1
"""
)

# KEYS: bucket. ARGV: bucket args (1..9), pause_ms. Never shortens an existing pause. -> paused_until (ms)
PENALIZE = (
    PRELUDE
    + """
local now = now_ms()
local r, t, i, o, p, hi, ho = load(KEYS[1], now)
p = math.max(p, now + tonumber(ARGV[10]))
store(KEYS[1], now, r, t, i, o, p, hi, ho)
return fmt(p)
"""
)

# KEYS: pause. ARGV: reason, until (epoch ms, '' = until lifted), message. Sets the provider pause unless
# the one held lasts longer ('' outlasts everything); expires at until (PEXPIREAT, server clock). -> 1 set, 0 kept
PAUSE_SET = (
    PRELUDE
    + """
local held = redis.call('HMGET', KEYS[1], 'reason', 'until')
if held[1] then
  local hu = held[2] or ''
  if hu == '' or (ARGV[2] ~= '' and tonumber(hu) >= tonumber(ARGV[2])) then return 0 end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'reason', ARGV[1], 'until', ARGV[2], 'message', ARGV[3], 'since', fmt(now_ms()))
if ARGV[2] ~= '' then redis.call('PEXPIREAT', KEYS[1], math.ceil(tonumber(ARGV[2]))) end
return 1
"""
)

# KEYS: bucket. Ends a pause now (an operator's "clear pause"); a missing bucket stays missing (= full).
UNPAUSE = """
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'p', 0) end
return 1
"""

# KEYS: bucket, obs, leases, pause. ARGV: bucket args (1..9). Read-only.
# -> {r, t, i, o, p, now, wait_ms (1 request of 1 token each), leases in flight, observed requests,
#     observed tokens, pause reason, until, message, since (false: not paused),
#     ra, ru, ta, tu, rx, rxt, tx, txt (the adjusted state, adaptive providers; false: none)}
SNAPSHOT = (
    PRELUDE
    + """
local now = now_ms()
local r, t, i, o, p = load(KEYS[1], now)
local w = wait_for(now, r, t, i, o, p, 1, 1, 1)
local leases = redis.call('ZCOUNT', KEYS[3], '(' .. fmt(now), '+inf')
local sec = math.floor(now / 1000)
local obs = redis.call('HGETALL', KEYS[2])
local stamps, req, tok = {}, {}, {}
for i = 1, #obs, 2 do
  local f, v = obs[i], tonumber(obs[i + 1])
  local kind, slot = string.sub(f, 1, 1), string.sub(f, 2)
  if kind == 's' then stamps[slot] = v elseif kind == 'r' then req[slot] = v else tok[slot] = v end
end
local orq, otk = 0, 0
for slot, st in pairs(stamps) do
  if st > sec - 60 and st <= sec then
    orq = orq + (req[slot] or 0)
    otk = otk + (tok[slot] or 0)
  end
end
local z = redis.call('HMGET', KEYS[4], 'reason', 'until', 'message', 'since')
local a = redis.call('HMGET', KEYS[1], 'ra', 'ru', 'ta', 'tu', 'rx', 'rxt', 'tx', 'txt')
return {fmt(r), fmt(t), fmt(i), fmt(o), fmt(p), fmt(now), math.ceil(w), leases, orq, otk,
        z[1], z[2], z[3], z[4], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]}
"""
)

# KEYS: a team's ledger keys (day, month). ARGV: n, then per key its limit (-1 = no limit).
# -> {0} reserved (every key += n); {2, i} key i is missing (seed it, then ask again);
#    {1, i, used} key i has no room (nothing taken).
BUDGET_RESERVE = """
local n = tonumber(ARGV[1])
local used = {}
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v == false then return {2, i} end
  used[i] = tonumber(v)
end
for i = 1, #KEYS do
  local limit = tonumber(ARGV[i + 1])
  if limit >= 0 and used[i] + n > limit then return {1, i, used[i]} end
end
for i = 1, #KEYS do redis.call('INCRBY', KEYS[i], n) end
return {0}
"""

# KEYS: ledger keys. ARGV: delta (settle: actual - reserved; give back: -reserved). Keys that are gone
# stay gone (they are re-seeded from the database); a key never goes below 0.
BUDGET_ADJUST = """
local d = tonumber(ARGV[1])
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v ~= false then
    local nv = tonumber(v) + d
    if nv < 0 then nv = 0 end
    redis.call('SET', KEYS[i], nv, 'KEEPTTL')
  end
end
return 1
"""
