// The /docs page: Swagger UI (vendored from swagger-ui-dist, see
// scripts/vendor-swagger-ui.sh) rendering /openapi.json. A file of its own,
// not an inline script, so that the page's Content-Security-Policy needs
// neither 'unsafe-inline' nor a hash that changes with every edit.
"use strict";
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  // Operations keep the document's order: the send first.
  deepLinking: true,
  docExpansion: "list",
  defaultModelsExpandDepth: 0,
  filter: true,
  displayRequestDuration: true,
  requestSnippetsEnabled: true,
  showExtensions: false,
  // Nothing leaves the page but calls to this server: no validator badge
  // (it would send the document to validator.swagger.io).
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
