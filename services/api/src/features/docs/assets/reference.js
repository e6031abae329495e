// Starts swagger-ui on the document this API serves. A file of its own (not inline) so
// the page's Content-Security-Policy can forbid inline scripts.
window.addEventListener('load', () => {
  var target = document.getElementById('reference');
  window.ui = SwaggerUIBundle({
    url: target.getAttribute('data-spec-url'),
    domNode: target,
    deepLinking: true,
    docExpansion: 'list',
    defaultModelsExpandDepth: 0,
    displayRequestDuration: true,
    filter: true,
    // No call to the public validator service: the page works offline.
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
  });
});
