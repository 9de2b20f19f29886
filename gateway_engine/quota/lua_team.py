"""The team's buckets in Redis (team_quota.py): the Lua functions ACQUIRE, RELEASE and RECONCILE (lua.py)
run after lua.py's prelude, so a team's buckets grant together with the provider's or not at all, and
the TEAM_SNAPSHOT script the usage page and /api/v1/usage read. Same arithmetic as local_team.py.

Keys:
  {prefix}q:{<provider>}:tm:<team>  hash: r, ts — the team's share of the provider's RPM (share cap); in
                                    the provider's hash slot
  {prefix}team:{<team>}:rl          hash: r (RPM tokens), t (TPM tokens), ts — the team's RPM / TPM bucket
                                    across all providers (only while the team has an rpm / tpm limit)
  {prefix}team:{<team>}:ro          hash: the team's observed rates (lua.py ``observe``'s 60 slots)

The team bucket's keys carry the team's hash tag, not the provider's: a script that takes from them
touches two Redis Cluster hash slots. They are passed only for a team with an RPM or TPM limit, so every
script of a team without one stays in one slot (docs/operations.md "Redis Cluster").

Team ARGV (six, from index ``a``): the share bucket's rate per ms and capacity, then the team RPM's and
the team TPM's ("0", "0": not set; then the key is not passed either).
"""

TEAM_FUNCTIONS = """
-- the optional team keys from KEYS[base]: the share bucket when ARGV[a] is not '0', then the team
-- bucket and its observed rates when ARGV[a + 2] or ARGV[a + 4] is not '0' (-> their indexes, 0: none)
local function team_keys(base, a)
  local sk, tk = 0, 0
  if ARGV[a] ~= '0' then sk = base; base = base + 1 end
  if ARGV[a + 2] ~= '0' or ARGV[a + 4] ~= '0' then tk = base end
  return sk, tk
end

local function share_load(key, now, rr, rc)
  local h = redis.call('HMGET', key, 'r', 'ts')
  local r = tonumber(h[1])
  if r == nil then return rc end
  local el = now - (tonumber(h[2]) or now)
  if el < 0 then el = 0 end
  return math.min(rc, r + el * rr)
end

local function share_store(key, now, r, rr, rc)
  redis.call('HSET', key, 'r', fmt(r), 'ts', fmt(now))
  redis.call('PEXPIRE', key, math.ceil(math.max((rc - r) / rr, 0)) + 1000)
end

local function team_levels(key, now, a)
  local h = redis.call('HMGET', key, 'r', 't', 'ts')
  local el = now - (tonumber(h[3]) or now)
  if el < 0 then el = 0 end
  return level(h[1], el, tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])),
    level(h[2], el, tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]))
end

-- an unset limit drops its field: set again later, that bucket starts full, not stale
local function team_put(key, now, qv, kv, a)
  local qr, qc, kr, kc = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local ttl = 0
  if qr > 0 then redis.call('HSET', key, 'r', fmt(qv)); ttl = math.max(ttl, (qc - qv) / qr)
  else redis.call('HDEL', key, 'r') end
  if kr > 0 then redis.call('HSET', key, 't', fmt(kv)); ttl = math.max(ttl, (kc - kv) / kr)
  else redis.call('HDEL', key, 't') end
  redis.call('HSET', key, 'ts', fmt(now))
  redis.call('PEXPIRE', key, math.ceil(ttl) + 1000)
end

-- the team's levels now and ms until 1 request and n tokens fit them (0: they do; -1: n never fits)
local function team_ask(sk, tk, now, n, a)
  local mr, qv, kv, tw = nil, nil, nil, 0
  if sk > 0 then
    mr = share_load(KEYS[sk], now, tonumber(ARGV[a]), tonumber(ARGV[a + 1]))
    tw = short(tw, mr, 1, tonumber(ARGV[a]))
  end
  if tk > 0 then
    local kr = tonumber(ARGV[a + 4])
    if kr > 0 and n > tonumber(ARGV[a + 5]) then return mr, qv, kv, -1 end
    qv, kv = team_levels(KEYS[tk], now, a)
    tw = short(short(tw, qv, 1, tonumber(ARGV[a + 2])), kv, n, kr)
  end
  return mr, qv, kv, tw
end

-- take dr requests and dn tokens (negative: give back) from the levels team_ask read, each clamped to
-- its capacity; the team's observed rates move with them
local function team_move(sk, tk, now, mr, qv, kv, dr, dn, a)
  if sk > 0 then
    local rc = tonumber(ARGV[a + 1])
    share_store(KEYS[sk], now, math.min(rc, mr - dr), tonumber(ARGV[a]), rc)
  end
  if tk > 0 then
    team_put(KEYS[tk], now, math.min(tonumber(ARGV[a + 3]), qv - dr), math.min(tonumber(ARGV[a + 5]), kv - dn), a)
    observe(KEYS[tk + 1], now, dr, dn)
  end
end
"""

# KEYS: team bucket, team observed rates. ARGV: the team ARGV (share "0", "0"). Read-only.
# -> {RPM tokens, TPM tokens, requests and tokens granted in the last 60 s}
TEAM_SNAPSHOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local function level(v, el, rate, cap)
  v = tonumber(v)
  if v == nil or rate == 0 then return cap end
  return math.min(cap, v + el * rate)
end
local h = redis.call('HMGET', KEYS[1], 'r', 't', 'ts')
local el = now - (tonumber(h[3]) or now)
if el < 0 then el = 0 end
local qv = level(h[1], el, tonumber(ARGV[3]), tonumber(ARGV[4]))
local kv = level(h[2], el, tonumber(ARGV[5]), tonumber(ARGV[6]))
local sec = math.floor(now / 1000)
local req, tok = 0, 0
for slot = 0, 59 do
  local f = redis.call('HMGET', KEYS[2], 's' .. slot, 'r' .. slot, 't' .. slot)
  local st = tonumber(f[1])
  if st ~= nil and st > sec - 60 and st <= sec then
    req = req + (tonumber(f[2]) or 0)
    tok = tok + (tonumber(f[3]) or 0)
  end
end
return {string.format('%.17g', qv), string.format('%.17g', kv), req, tok}
"""
