// Command bridge is the boxwire host process: it authenticates clients,
// starts a container sandbox per thread through the Docker Engine API,
// relays the wire protocol between clients and each sandbox's agent, and
// proxies the agents' LLM calls so the API key never enters a sandbox.
//
// Usage:
//
//	BOXWIRE_TOKEN=secret OPENAI_API_KEY=sk-... bridge [--listen 127.0.0.1:7420]
//	    [--image boxwire:latest] [--data-dir /var/lib/boxwire] [--model NAME]
//
// Each flag has an environment variable (BOXWIRE_BRIDGE_LISTEN,
// BOXWIRE_TOKEN, BOXWIRE_IMAGE, BOXWIRE_DATA_DIR, BOXWIRE_MODEL); the flag
// wins. OPENAI_BASE_URL (default https://api.openai.com/v1) and
// OPENAI_API_KEY configure the model endpoint; DOCKER_HOST the engine.
// SIGINT or SIGTERM shut the bridge down gracefully and remove every sandbox
// it created.
package main
