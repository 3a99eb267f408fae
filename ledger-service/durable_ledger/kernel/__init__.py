"""The kernel: leaves every feature may use (errors, fencing, limits, configuration, input checks,
digests, state names, phases, secret detection, the n8n execution context, logging setup).
Nothing here imports a feature, the store or Flask."""
