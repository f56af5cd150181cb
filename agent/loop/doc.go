// Package loop runs the agent's LLM tool loop: it streams a model's answer,
// runs the tools the model asks for, feeds their results back and repeats
// until the model stops calling tools, the step limit is reached, the model
// fails or the turn is interrupted.
//
// The model is a one-method interface (Model), so the loop can be driven by
// a scripted fake in tests and by OpenAI (any OpenAI-compatible endpoint,
// through github.com/sashabaranov/go-openai) in the agent. The loop reports
// what happens as wire events through an emit callback; the caller (the
// session) numbers them and fans them out.
package loop
