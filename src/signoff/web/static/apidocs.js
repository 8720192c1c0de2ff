// The API docs page (/docs): starts the locally served Swagger UI on the app's OpenAPI
// description. A file, not an inline script, so the page keeps script-src 'self'.

const root = document.getElementById("swagger-ui");

window.SwaggerUIBundle({
  url: root.dataset.openapiUrl,
  domNode: root,
  deepLinking: true,
  // the public validator would be a request to another host: none leaves this server
  validatorUrl: null,
});
