// The admin API reference: swagger-ui on the admin API's own OpenAPI document, which
// (like every admin call) takes the admin token. The token is asked for on the page,
// kept in this tab's sessionStorage only, and sent as Authorization: Bearer with the
// document request and every "Try it out" call. A file of its own (not inline) so the
// page's Content-Security-Policy can forbid inline scripts.
window.addEventListener('load', () => {
  var form = document.getElementById('token-form');
  var input = document.getElementById('admin-token');
  var status = document.getElementById('token-status');
  var target = document.getElementById('reference');
  var specUrl = target.getAttribute('data-spec-url');

  function show(token) {
    status.textContent = 'Loading…';
    fetch(specUrl, { headers: { Authorization: `Bearer ${token}` } }).then(
      (response) => {
        if (response.status === 401) {
          status.textContent = 'That token was refused (401): use the admin token of this deployment.';
          sessionStorage.removeItem('gantryAdminToken');
          return;
        }
        if (!response.ok) {
          status.textContent = `The document could not be loaded (HTTP ${response.status}).`;
          return;
        }
        return response.json().then((spec) => {
          sessionStorage.setItem('gantryAdminToken', token);
          status.textContent = 'Calls made from this page carry this token.';
          target.textContent = '';
          window.ui = SwaggerUIBundle({
            spec: spec,
            domNode: target,
            deepLinking: true,
            docExpansion: 'list',
            defaultModelsExpandDepth: 0,
            displayRequestDuration: true,
            filter: true,
            validatorUrl: null,
            requestInterceptor: (request) => {
              request.headers.Authorization = `Bearer ${token}`;
              return request;
            },
            presets: [SwaggerUIBundle.presets.apis],
            layout: 'BaseLayout',
          });
        });
      },
      () => {
        status.textContent = 'The document could not be loaded (network error).';
      },
    );
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    var token = input.value.trim();
    if (token) show(token);
  });
  var stored = sessionStorage.getItem('gantryAdminToken');
  if (stored) {
    input.value = stored;
    show(stored);
  }
});
