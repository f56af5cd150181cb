// Modules the bundler provides or the page never loads.
declare module "*.css";
// The SDK loads ws only in Node (socket.ts); the page uses the browser's WebSocket.
declare module "ws";
