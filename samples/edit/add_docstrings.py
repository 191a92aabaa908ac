import threading
import time


class TokenBucket:
    def __init__(self, rate, capacity, clock=time.monotonic):
        if rate <= 0:
            raise ValueError("rate must be positive")
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.rate = float(rate)
        self.capacity = float(capacity)
        self._tokens = float(capacity)
        self._clock = clock
        self._last = clock()
        self._lock = threading.Lock()

    def _refill(self):
        now = self._clock()
        elapsed = now - self._last
        self._last = now
        self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)

    def try_acquire(self, tokens=1):
        with self._lock:
            self._refill()
            if self._tokens >= tokens:
                self._tokens -= tokens
                return True
            return False

    def wait_time(self, tokens=1):
        with self._lock:
            self._refill()
            missing = tokens - self._tokens
            return max(0.0, missing / self.rate)

    def acquire(self, tokens=1, timeout=None):
        if tokens > self.capacity:
            raise ValueError("cannot acquire more tokens than the bucket holds")
        deadline = None if timeout is None else self._clock() + timeout
        while True:
            if self.try_acquire(tokens):
                return True
            delay = self.wait_time(tokens)
            if deadline is not None:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return False
                delay = min(delay, remaining)
            time.sleep(delay)

    @property
    def available(self):
        with self._lock:
            self._refill()
            return self._tokens


class KeyedLimiter:
    def __init__(self, rate, capacity):
        self.rate = rate
        self.capacity = capacity
        self._buckets = {}
        self._lock = threading.Lock()

    def bucket_for(self, key):
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = TokenBucket(self.rate, self.capacity)
                self._buckets[key] = bucket
            return bucket

    def allow(self, key, tokens=1):
        return self.bucket_for(key).try_acquire(tokens)

    def forget_idle(self):
        removed = 0
        with self._lock:
            for key in list(self._buckets):
                if self._buckets[key].available >= self.capacity:
                    del self._buckets[key]
                    removed += 1
        return removed


def parse_rate(spec):
    count, _, unit = spec.partition("/")
    seconds = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600}
    if unit not in seconds:
        raise ValueError(f"unknown rate unit: {unit!r}")
    return int(count) / seconds[unit]


def limiter_from_config(config):
    rate = parse_rate(config.get("rate", "10/s"))
    burst = int(config.get("burst", max(1, rate)))
    if config.get("per_key", False):
        return KeyedLimiter(rate, burst)
    return TokenBucket(rate, burst)
