"""The Redis concurrency leases' Lua (redis_leases.py; the keys: lua.py): a sorted set per provider,
{prefix}q:{<name>}:l, lease id -> expiry (server ms). ``take_lease`` is shared by LEASE_ACQUIRE and by
lua.py's ADMIT, which takes the lease in the same atomic step as the bucket grant (the leases key has
the provider's hash tag, so both lie in one Redis Cluster slot)."""

# take a lease (id -> expiry, integer server ms like LEASE_ACQUIRE) if fewer than max are live:
# -> 0 taken, else ms until the earliest live one expires
TAKE_LEASE = """
local function take_lease(key, id, max, ttl)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZCARD', key) < max then
    redis.call('ZADD', key, now + ttl, id)
    if redis.call('PTTL', key) < ttl + 1000 then redis.call('PEXPIRE', key, ttl + 1000) end
    return 0
  end
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(first[2]) - now)
end
"""

# KEYS: leases, pause. ARGV: lease id, max concurrency, ttl ms. -> 0 taken, else ms until the earliest
# expiry; or {3, reason, until, message, since}: the provider is paused (nothing taken)
LEASE_ACQUIRE = (
    TAKE_LEASE
    + """
local z = redis.call('HMGET', KEYS[2], 'reason', 'until', 'message', 'since')
if z[1] then return {3, z[1], z[2] or '', z[3] or '', z[4] or '0'} end
return take_lease(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))
"""
)

# KEYS: leases. ARGV: max concurrency. Read-only. -> 0 a slot is free now, else ms until the earliest expiry
LEASE_PEEK = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local max = tonumber(ARGV[1])
local after = string.format('(%d', now)
if redis.call('ZCOUNT', KEYS[1], after, '+inf') < max then return 0 end
local first = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
return math.max(1, tonumber(first[2]) - now)
"""

# KEYS: leases. ARGV: lease id, ttl ms. -> 1 refreshed, 0 lease is gone (expired)
LEASE_REFRESH = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local exp = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if exp == nil or exp <= now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl + 1000 then redis.call('PEXPIRE', KEYS[1], ttl + 1000) end
return 1
"""
