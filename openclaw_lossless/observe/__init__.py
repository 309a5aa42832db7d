"""What an operator watches: counters and latencies (``metrics``), the last hour minute by minute
(``last_hour``), each agent's last commit, assemble and recall (``activity``), and ``/metrics`` for
Prometheus (``prometheus``). Kept in memory, nothing leaves the machine; a turn only adds to them.
"""
